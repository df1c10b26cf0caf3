"""Training a draft head on the target's features: its guesses pulled towards the target's.

Row p of the head reads the target's feature at p - 1 and token p, and guesses the feature
at p; the loss compares that guess with the target's real feature there, through the
target's output matrix on the head's reduced vocabulary (KL from the target's distribution
to the head's) and directly (a smooth L1 on the feature, EAGLE's regression term).

Drafting k tokens feeds the head its own guesses: its second draft reads the feature it
guessed for the first. So training unrolls `passes` steps (EAGLE-3's training-time test):
pass s reads, at row p, the feature pass s - 1 guessed at p - 1, and attends as drafting
step s would: to the first pass's rows (real features) up to p - s + 1, then to one row of
each later pass on the diagonal, its own last. Row p of pass s is the s-th draft of a round
that committed p - s + 2 tokens, so only answer positions late enough count.

Held-out acceptance per pass is the share of held-out rows where the head's argmax is the
target's (each pass given correct earlier tokens: the conditional acceptance of that draft
position), and from them an estimate of τ at k = 4. Checkpoints hold the head, the optimizer
and the step, so a run resumes where it stopped. Knows nothing about the command line or
how the features were collected.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from specchat.distill.head_data import FeatureSample
from specchat.distill.train import TrainSettings, batch_order, learning_rate, split_heldout
from specchat.models.head.network import HeadNetwork

REGRESSION_WEIGHT = 1.0
"""Weight of the smooth-L1 feature term beside the KL term."""
PASS_DECAY = 0.8
"""Weight of pass s is PASS_DECAY ** (s - 1): later drafts matter only if earlier ones hold."""
K_ESTIMATE = 4


@dataclass
class Tables:
    """The target's frozen tables the head shares: its embedding and its output rows."""

    embed: Callable[[torch.Tensor], torch.Tensor]
    """ids [...] -> float32 embeddings [..., hidden]."""
    output: torch.Tensor
    """[vocab', hidden] float32: the output matrix's rows of the head's vocabulary."""


@dataclass
class HeadProgress:
    step: int
    steps: int
    tokens_per_s: float
    loss: float
    acceptance: list[float] | None
    """Held-out acceptance of each draft position (None between evaluations)."""

    @property
    def tau(self) -> float | None:
        return None if self.acceptance is None else estimated_tau(self.acceptance)


def estimated_tau(acceptance: list[float], k: int = K_ESTIMATE) -> float:
    """Expected tokens per round at k drafts, each position accepted with its conditional
    rate (positions past the last measured one at the last's rate), plus the target's own."""
    tau, run = 1.0, 1.0
    for i in range(k):
        run *= acceptance[min(i, len(acceptance) - 1)]
        tau += run
    return tau


@dataclass
class Batch:
    ids: torch.Tensor
    """[B, T] token ids (padded)."""
    features: torch.Tensor
    """[B, T, hidden] float32: the target's feature after each token (zeros where unknown)."""
    first_loss: torch.Tensor
    """[B] the first row whose guess is scored (the last prompt row)."""
    last_loss: torch.Tensor
    """[B] one past the last row with a known next feature."""


def make_batch(samples: list[FeatureSample], hidden: int,
               device: torch.device = torch.device("cpu")) -> Batch:
    """The samples padded to one width, on `device`."""
    width = max(int(s.ids.shape[0]) for s in samples)
    ids = torch.zeros((len(samples), width), dtype=torch.long)
    features = torch.zeros((len(samples), width, hidden))
    for i, sample in enumerate(samples):
        n = int(sample.ids.shape[0])
        ids[i, :n] = sample.ids.long()
        features[i, : n - 1] = sample.features.float()
    first = torch.tensor([s.prompt_len - 1 for s in samples])
    last = torch.tensor([int(s.ids.shape[0]) - 1 for s in samples])
    return Batch(ids.to(device), features.to(device), first.to(device), last.to(device))


def shifted(x: torch.Tensor, by: int) -> torch.Tensor:
    """x [B, T, ...] moved `by` rows later along T, zeros first."""
    if by == 0:
        return x
    return torch.cat([torch.zeros_like(x[:, :by]), x[:, :-by]], dim=1)


def expand_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[B, T, kv_heads, d] -> [B, heads, T, d] (each key head shared by its group)."""
    return x.repeat_interleave(heads // x.shape[2], dim=2).transpose(1, 2)


def unrolled(network: HeadNetwork, batch: Batch, embeds: torch.Tensor, passes: int
             ) -> list[torch.Tensor]:
    """The head's feature guesses [B, T, hidden] of each pass (module docstring)."""
    shape = network.shape
    B, T = batch.ids.shape
    positions = torch.arange(T, device=batch.ids.device)
    keys, values, guesses = [], [], []
    previous = shifted(batch.features, 1)
    causal = positions[None, :] <= positions[:, None]  # [T(query), T(key)]
    for s in range(1, passes + 1):
        x = network.inputs(previous, embeds)
        q, k, v = network.attention_inputs(x.reshape(B * T, -1), positions.repeat(B))
        q = q.reshape(B, T, shape.heads, -1).transpose(1, 2)
        keys.append(expand_heads(k.reshape(B, T, shape.kv_heads, -1), shape.heads))
        values.append(expand_heads(v.reshape(B, T, shape.kv_heads, -1), shape.heads))
        attended = pass_attention(q, keys, values, torch.tril(causal, diagonal=-(s - 1)))
        guess = network.finish(x, attended.transpose(1, 2).reshape(B, T, -1))
        guesses.append(guess)
        previous = shifted(guess, 1)
    return guesses


def pass_attention(q: torch.Tensor, keys: list, values: list, first_mask: torch.Tensor
                   ) -> torch.Tensor:
    """Attention of pass s = len(keys): to pass 1's keys where `first_mask` allows, and to
    pass t's key s - t rows back, for t = 2..s (the diagonal)."""
    s, scale = len(keys), q.shape[-1] ** -0.5
    scores = [(q @ keys[0].transpose(-1, -2) * scale).masked_fill(~first_mask, float("-inf"))]
    for t in range(2, s + 1):
        key = shifted(keys[t - 1].transpose(1, 2), s - t).transpose(1, 2)
        scores.append((q * key).sum(-1, keepdim=True) * scale)
    weights = torch.cat(scores, dim=-1).float().softmax(-1).to(q.dtype)
    out = weights[..., : q.shape[2]] @ values[0]
    for t in range(2, s + 1):
        value = shifted(values[t - 1].transpose(1, 2), s - t).transpose(1, 2)
        out = out + weights[..., q.shape[2] + t - 2: q.shape[2] + t - 1] * value
    return out


def scored_rows(batch: Batch, s: int) -> torch.Tensor:
    """[B, T] bool: rows of pass s that are the s-th draft of a round inside the answer."""
    positions = torch.arange(batch.ids.shape[1], device=batch.ids.device)[None, :]
    return ((positions >= batch.first_loss[:, None] + s - 1)
            & (positions < batch.last_loss[:, None]))


def pass_loss(guess: torch.Tensor, truth: torch.Tensor, p: torch.Tensor, output: torch.Tensor,
              temperature: float) -> torch.Tensor:
    """KL(target || head) over the head's vocabulary (`p`: the target's distribution there),
    plus the smooth-L1 feature term."""
    log_q = (guess @ output.T / temperature).float().log_softmax(-1)
    kl = (p * (p.clamp_min(1e-12).log() - log_q)).sum(-1).mean() * temperature ** 2
    return kl + REGRESSION_WEIGHT * F.smooth_l1_loss(guess.float(), truth.float())


def head_loss(network: HeadNetwork, tables: Tables, batch: Batch, passes: int,
              temperature: float) -> tuple[torch.Tensor, int]:
    """(the weighted loss over every pass, scored rows of the first pass). The target's
    distributions are worked out once, at the first pass's rows (later passes score a subset)."""
    first = scored_rows(batch, 1)
    truth = batch.features[first]
    with torch.no_grad():
        p = (truth @ tables.output.T / temperature).float().softmax(-1)
    total, weights = torch.zeros((), device=batch.ids.device), 0.0
    for s, guess in enumerate(unrolled(network, batch, tables.embed(batch.ids), passes), start=1):
        rows = scored_rows(batch, s)[first]
        if not rows.any():
            continue
        weight = PASS_DECAY ** (s - 1)
        total = total + weight * pass_loss(guess[first][rows], truth[rows], p[rows],
                                           tables.output, temperature)
        weights += weight
    return total / max(weights, 1e-9), int(first.sum())


@torch.no_grad()
def heldout_acceptance(network: HeadNetwork, tables: Tables, samples: list[FeatureSample],
                       passes: int) -> list[float]:
    """Per pass: share of held-out scored rows where the head's argmax is the target's
    (measured in eval mode; the network's mode is restored)."""
    training, hits, totals = network.training, [0] * passes, [0] * passes
    network.eval()
    for i in range(0, len(samples), 8):
        batch = make_batch(samples[i:i + 8], network.shape.hidden, network.device)
        guesses = unrolled(network, batch, tables.embed(batch.ids), passes)
        for s, guess in enumerate(guesses, start=1):
            mask = scored_rows(batch, s)
            want = (batch.features[mask] @ tables.output.T).argmax(-1)
            hits[s - 1] += int(((guess[mask] @ tables.output.T).argmax(-1) == want).sum())
            totals[s - 1] += int(mask.sum())
    network.train(training)
    return [h / max(1, t) for h, t in zip(hits, totals)]


def save_checkpoint(path: Path, network: HeadNetwork, optimizer, step: int, best: float,
                    samples: int) -> None:
    staging = path.with_suffix(".tmp")
    torch.save({"step": step, "best": best, "samples": samples, "head": network.state_dict(),
                "optimizer": optimizer.state_dict()}, staging)
    staging.replace(path)


def load_checkpoint(path: Path, network: HeadNetwork, optimizer,
                    samples: int) -> tuple[int, float]:
    """(step, best held-out τ); the best is forgotten when the data changed."""
    state = torch.load(path, map_location="cpu")
    network.load_state_dict(state["head"])
    optimizer.load_state_dict(state["optimizer"])
    return int(state["step"]), float(state["best"]) if state.get("samples") == samples else -1.0


@dataclass
class HeadTraining:
    """What one training run needs besides the network and the data."""

    settings: TrainSettings
    passes: int
    checkpoint: Path
    on_best: Callable[[list[float]], None]
    report: Callable[[HeadProgress], None] = lambda progress: None
    resume: bool = False
    grown: bool = False
    """The network starts from an earlier head's weights: measured before the first step,
    so the run keeps that head unless training beats it."""


def train_head(network: HeadNetwork, tables: Tables, samples: list[FeatureSample],
               run: HeadTraining) -> float:
    """Train `network` in place; returns the best held-out τ estimate seen."""
    settings = run.settings
    train_set, held = split_heldout(samples)
    optimizer = torch.optim.AdamW(network.parameters(), lr=settings.lr, weight_decay=0.0)
    step, best = (load_checkpoint(run.checkpoint, network, optimizer, len(samples))
                  if run.resume and run.checkpoint.exists() else (0, -1.0))
    if run.grown and step == 0:
        best = kept_as_best(heldout_acceptance(network, tables, held, run.passes), run)
    while step < settings.steps:
        loss, tokens, seconds = train_step(network, tables, train_set, optimizer, step, run)
        step += 1
        acceptance = None
        if step % settings.eval_every == 0 or step == settings.steps:
            acceptance = heldout_acceptance(network, tables, held, run.passes)
            if estimated_tau(acceptance) > best:
                best = kept_as_best(acceptance, run)
        if step % settings.checkpoint_every == 0 or step == settings.steps:
            save_checkpoint(run.checkpoint, network, optimizer, step, best, len(samples))
        run.report(HeadProgress(step, settings.steps, tokens / max(seconds, 1e-9), loss,
                                acceptance))
    network.eval()
    return best


def kept_as_best(acceptance: list[float], run: HeadTraining) -> float:
    """Keep the network as the run's best head (`on_best`, with its held-out acceptance);
    returns its τ estimate, the one later evaluations must beat."""
    run.on_best(acceptance)
    return estimated_tau(acceptance)


def train_step(network: HeadNetwork, tables: Tables, samples: list[FeatureSample], optimizer,
               step: int, run: HeadTraining) -> tuple[float, int, float]:
    started, settings = time.perf_counter(), run.settings
    batch = make_batch([samples[i] for i in batch_order(len(samples), step, settings)],
                       network.shape.hidden, network.device)
    for group in optimizer.param_groups:
        group["lr"] = learning_rate(step, settings)
    with torch.autocast(network.device.type, dtype=torch.bfloat16):
        loss, rows = head_loss(network, tables, batch, run.passes, settings.temperature)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(network.parameters(), 1.0)
    optimizer.step()
    return float(loss.detach()), rows, time.perf_counter() - started
