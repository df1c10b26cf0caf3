"""Verification: which drafts the target keeps, and the token that follows them.

Leviathan et al. (2023) notation: p is the target's processed distribution, q the
draft's. Draft i is accepted with probability min(1, p_i(x) / q_i(x)); at the first
rejection the correction is drawn from norm(max(0, p - q)), and after a full
accept a bonus token is drawn from p at the last position. Greedy is the special
case "accept iff the draft equals the target's argmax".

Everything stays on the device as tensors; the decoder reads the drafts, the
accepted count and the token together, with one synchronisation per round.
"""

from __future__ import annotations

import torch

from specchat.engine.params import SamplingParams
from specchat.engine.sampling import sample, to_probs


def leading_true(mask: torch.Tensor) -> torch.Tensor:
    """How many entries of a 1-D bool tensor are True before the first False."""
    return mask.long().cumprod(dim=0).sum()


def numpy_friendly(logits: torch.Tensor) -> bool:
    """Whether `logits` are CPU float32 rows, which numpy reduces about ten times faster
    than torch does one row of a large vocabulary (a plain step on the llama.cpp backend
    pays a reduction every token)."""
    return logits.device.type == "cpu" and logits.dtype == torch.float32


def row_argmax(logits: torch.Tensor) -> torch.Tensor:
    """Index of each row's largest logit, the first one on a tie (as `torch.argmax`),
    through numpy where `numpy_friendly`."""
    if numpy_friendly(logits):
        return torch.from_numpy(logits.numpy().argmax(axis=-1))
    return logits.argmax(dim=-1)


def pick_row(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """`table[index]` for a 0-dim index tensor, on the device: indexing with the tensor
    itself reads it to the host first (a synchronisation on a GPU)."""
    return table.index_select(0, index.reshape(1)).squeeze(0)


def verify_greedy(drafts: torch.Tensor,
                  target_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(accepted count, next token) at temperature 0."""
    choice = row_argmax(target_logits)
    accepted = leading_true(drafts == choice[: drafts.shape[0]])
    return accepted, pick_row(choice, accepted)


def _correction_rows(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)) per draft position, falling back to p where p == q."""
    residual = (p - q).clamp_min(0.0)
    mass = residual.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, residual / mass.clamp_min(1e-30), p)


def widened(q: torch.Tensor, width: int) -> torch.Tensor:
    """q over `width` columns: a draft whose head is narrower than its target's (the target
    has padding rows or special tokens the draft lacks) gives them probability 0."""
    missing = width - q.shape[-1]
    return torch.nn.functional.pad(q, (0, missing)) if missing > 0 else q


def verify_sampled(drafts: torch.Tensor, draft_probs: torch.Tensor | None,
                   target_logits: torch.Tensor, params: SamplingParams,
                   generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(accepted count, next token) by rejection sampling.

    `draft_probs` is the processed q each draft was sampled from ([k, vocab]); None
    means the drafter is deterministic (n-gram lookup), i.e. q is one-hot.
    """
    k = drafts.shape[0]
    p = to_probs(target_logits, params)
    if draft_probs is None:
        draft_probs = torch.nn.functional.one_hot(drafts, p.shape[-1]).to(p.dtype)
    draft_probs = widened(draft_probs, p.shape[-1])
    positions = torch.arange(k, device=p.device)
    p_at = p[positions, drafts]
    q_at = draft_probs[positions, drafts]
    u = torch.rand(k, generator=generator, device=p.device)
    accepted = leading_true(u * q_at < p_at)
    rows = torch.cat([_correction_rows(p[:k], draft_probs), p[k:]], dim=0)
    return accepted, sample(pick_row(rows, accepted), generator)


def verify(drafts: torch.Tensor, draft_probs: torch.Tensor | None,
           target_logits: torch.Tensor, params: SamplingParams,
           generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Accepted draft count and the resampled/bonus token, as device tensors (no sync)."""
    if params.greedy:
        return verify_greedy(drafts, target_logits)
    return verify_sampled(drafts, draft_probs, target_logits, params, generator)
