"""Training a draft on the target's own answers: KL to the target's top-k distribution.

At every answer position the draft's distribution (over its output vocabulary:
the rows of the frozen, shared head for the allowed tokens) is pulled towards
the target's softened top-k distribution there, so the draft learns the
target's ranking, not only its argmax. Held-out acceptance is the share of
held-out answer positions where the draft's argmax equals the target's: the
per-token greedy acceptance rate a speculative decoder would see. Checkpoints
hold the draft's own weights, the optimizer and the step, so `resume` picks up
exactly where a run stopped. Knows nothing about the command line.
"""

from __future__ import annotations

import math
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

import torch
import torch.nn.functional as F

from specchat.distill.draft import trainable_parameters
from specchat.models.torch_backend.shipped_draft import own_state
from specchat.distill.teacher import AnswerSample, Sample

S = TypeVar("S", bound=AnswerSample)
"""A training sample of any kind (a teacher answer, or a head's feature sample)."""

HELDOUT_EVERY = 20
"""About one prompt in 20 is held out from training, every answer to it (the greedy one and
the sampled passes'), and used to measure acceptance."""


@dataclass
class TrainSettings:
    """Knobs of one training run."""

    steps: int = 1000
    batch_size: int = 8
    """Answers per step."""
    lr: float = 1e-3
    warmup: int = 30
    temperature: float = 1.0
    """Softening of both distributions in the KL (multiplied back by T²)."""
    checkpoint_every: int = 50
    eval_every: int = 50
    seed: int = 0


@dataclass
class Progress:
    """What a progress bar shows after a step."""

    step: int
    steps: int
    tokens_per_s: float
    loss: float
    heldout_acceptance: float | None


def choose_vocab(samples: list[Sample], size: int | None, eos_ids: set[int],
                 full_size: int) -> list[int] | None:
    """The `size` most frequent answer tokens (end-of-sequence always in); None: all.

    Ties, and the room left when the answers hold fewer distinct tokens, go to the
    tokens the target most often ranks in its top-k, so a small data set still
    yields a vocabulary of the requested size.
    """
    if not size or size >= full_size:
        return None
    answers: Counter[int] = Counter()
    ranked: Counter[int] = Counter()
    for sample in samples:
        answers.update(sample.ids[sample.prompt_len:].tolist())
        ranked.update(sample.topk_ids.flatten().tolist())
    order = sorted(set(answers) | set(ranked), key=lambda t: (-answers[t], -ranked[t], t))
    return sorted(set(order[:size]) | set(eos_ids))


def split_heldout(samples: list[S]) -> tuple[list[S], list[S]]:
    """(training, held-out) samples, split by prompt: an answer is held out with every other
    answer to its prompt, so no held-out prompt's text was trained on."""
    held_out = [is_heldout(s) for s in samples]
    held = [s for s, out in zip(samples, held_out) if out]
    train = [s for s, out in zip(samples, held_out) if not out]
    return train, held or train[:1]


def is_heldout(sample: AnswerSample) -> bool:
    """Whether `sample`'s prompt is held out: a stable hash of its prompt ids, one in
    HELDOUT_EVERY, the same in every run and pass."""
    prompt = sample.ids[:sample.prompt_len].to(torch.int64).numpy().tobytes()
    return zlib.crc32(prompt) % HELDOUT_EVERY == HELDOUT_EVERY - 1


class Head:
    """The draft's output vocabulary: head row ids and a full-vocab -> row lookup."""

    def __init__(self, vocab: list[int] | None, full_size: int, device):
        ids = torch.tensor(vocab if vocab is not None else range(full_size), dtype=torch.long)
        self.ids = ids.to(device)
        self.lookup = torch.full((full_size,), -1, dtype=torch.long, device=device)
        self.lookup[self.ids] = torch.arange(len(ids), device=device)

    def logits(self, draft, hidden: torch.Tensor) -> torch.Tensor:
        weight = draft.get_output_embeddings().weight[self.ids]
        return hidden @ weight.T


@dataclass
class Batch:
    ids: torch.Tensor
    mask: torch.Tensor
    rows: torch.Tensor
    """Batch row of each answer position."""
    cols: torch.Tensor
    """Sequence position whose hidden state predicts that answer token."""
    top_ids: torch.Tensor
    top_logits: torch.Tensor

    @property
    def tokens(self) -> int:
        return int(self.rows.shape[0])


def make_batch(samples: list[Sample], pad_id: int, device) -> Batch:
    width = max(int(s.ids.shape[0]) for s in samples)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(samples), width), dtype=torch.long)
    rows, cols = [], []
    for i, s in enumerate(samples):
        n = int(s.ids.shape[0])
        ids[i, :n], mask[i, :n] = s.ids, 1
        positions = torch.arange(s.prompt_len - 1, n - 1)
        rows.append(torch.full_like(positions, i))
        cols.append(positions)
    top_ids = torch.cat([s.topk_ids.long() for s in samples])
    top_logits = torch.cat([s.topk_logits.float() for s in samples])
    return Batch(ids.to(device), mask.to(device), torch.cat(rows).to(device),
                 torch.cat(cols).to(device), top_ids.to(device), top_logits.to(device))


def draft_logits(draft, head: Head, batch: Batch) -> torch.Tensor:
    """Draft logits over its output vocabulary at every answer position, [N, V']."""
    device_type = batch.ids.device.type
    with torch.autocast(device_type, dtype=torch.bfloat16):
        hidden = draft.get_decoder()(input_ids=batch.ids, attention_mask=batch.mask).last_hidden_state
        return head.logits(draft, hidden[batch.rows, batch.cols]).float()


def distill_loss(student: torch.Tensor, head: Head, batch: Batch, temperature: float) -> torch.Tensor:
    """KL(target top-k, softened || draft, softened) * T², over positions with a known target."""
    where = head.lookup[batch.top_ids]  # [N, K]: row in the draft's head, -1 if absent
    teacher = batch.top_logits.masked_fill(where < 0, float("-inf")) / temperature
    usable = torch.isfinite(teacher).any(-1)
    p = teacher[usable].softmax(-1)
    log_q = (student[usable] / temperature).log_softmax(-1).gather(-1, where[usable].clamp(min=0))
    terms = p * (p.clamp_min(1e-12).log() - log_q)
    kl = torch.where(p > 0, terms, torch.zeros_like(terms)).sum(-1)  # tokens outside the head: p = 0
    return kl.mean() * temperature ** 2


@torch.no_grad()
def heldout_acceptance(draft, head: Head, samples: list[Sample], pad_id: int, device) -> float:
    """Share of held-out answer positions where the draft's argmax is the target's."""
    hits = total = 0
    for i in range(0, len(samples), 16):
        batch = make_batch(samples[i:i + 16], pad_id, device)
        guess = head.ids[draft_logits(draft, head, batch).argmax(-1)]
        hits += int((guess == batch.top_ids[:, 0]).sum())
        total += batch.tokens
    return hits / max(1, total)


def learning_rate(step: int, settings: TrainSettings) -> float:
    if step < settings.warmup:
        return settings.lr * (step + 1) / settings.warmup
    progress = (step - settings.warmup) / max(1, settings.steps - settings.warmup)
    return settings.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def batch_order(count: int, step: int, settings: TrainSettings) -> list[int]:
    """Sample indices of `step`: epoch-wise seeded shuffles, reproducible on resume."""
    per_epoch = max(1, count // settings.batch_size)
    epoch, index = divmod(step, per_epoch)
    order = torch.randperm(count, generator=torch.Generator().manual_seed(settings.seed + epoch))
    return order[index * settings.batch_size:(index + 1) * settings.batch_size].tolist()


def save_checkpoint(path: Path, draft, optimizer, step: int, best: float, samples: int) -> None:
    staging = path.with_suffix(".tmp")
    torch.save({"step": step, "best": best, "samples": samples, "draft": own_state(draft),
                "optimizer": optimizer.state_dict()}, staging)
    staging.replace(path)


def load_checkpoint(path: Path, draft, optimizer, samples: int) -> tuple[int, float]:
    """(step, best held-out acceptance); the best is forgotten when the data grew,
    since the held-out set grew with it and old scores no longer compare."""
    state = torch.load(path, map_location="cpu")
    draft.load_state_dict(state["draft"], strict=False)
    optimizer.load_state_dict(state["optimizer"])
    same_data = state.get("samples") == samples
    return int(state["step"]), float(state["best"]) if same_data else -1.0


def train(draft, samples: list[Sample], vocab: list[int] | None, settings: TrainSettings,
          pad_id: int, checkpoint: Path, on_best: Callable[[float], None],
          report: Callable[[Progress], None] = lambda p: None, resume: bool = False) -> float:
    """Train `draft` in place; returns the best held-out acceptance seen."""
    device = next(draft.parameters()).device
    full_size = draft.get_output_embeddings().weight.shape[0]
    head = Head(vocab, full_size, device)
    train_set, held = split_heldout(samples)
    optimizer = torch.optim.AdamW(trainable_parameters(draft), lr=settings.lr, weight_decay=0.0)
    step, best = (load_checkpoint(checkpoint, draft, optimizer, len(samples))
                  if resume and checkpoint.exists() else (0, -1.0))
    draft.train()
    while step < settings.steps:
        loss, tokens, seconds = train_step(draft, head, train_set, optimizer, step, settings, pad_id)
        step += 1
        accepted = None
        if step % settings.eval_every == 0 or step == settings.steps:
            draft.eval()
            accepted = heldout_acceptance(draft, head, held, pad_id, device)
            draft.train()
            if accepted > best:
                best = accepted
                on_best(best)
        if step % settings.checkpoint_every == 0 or step == settings.steps:
            save_checkpoint(checkpoint, draft, optimizer, step, best, len(samples))
        report(Progress(step, settings.steps, tokens / max(seconds, 1e-9), loss, accepted))
    draft.eval()
    return best


def train_step(draft, head: Head, samples: list[Sample], optimizer, step: int,
               settings: TrainSettings, pad_id: int) -> tuple[float, int, float]:
    started = time.perf_counter()
    batch = make_batch([samples[i] for i in batch_order(len(samples), step, settings)], pad_id,
                       head.ids.device)
    for group in optimizer.param_groups:
        group["lr"] = learning_rate(step, settings)
    loss = distill_loss(draft_logits(draft, head, batch), head, batch, settings.temperature)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]], 1.0)
    optimizer.step()
    return float(loss.detach()), batch.tokens, time.perf_counter() - started
