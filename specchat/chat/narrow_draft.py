"""A same-tokenizer draft whose head is narrower than its target's, fed the target's tokens.

Near-compatible vocabularies (models/vocabulary.py) speculate as one tokenizer, but the
target may commit a token the draft has no row for: a special token only the target added,
or a padding row of its head. The draft reads every committed token (the engine's catch-up
and its own proposals feed it the sequence as it is), so such an id would index past its
embedding. `NarrowDraft` hands it the draft's last column instead: a draft's input only
shapes what it proposes, never what is committed, so any stand-in is lossless. Knows
token ids only.
"""

from __future__ import annotations

from typing import Any

import torch


class NarrowDraft:
    """The engine's `CausalModel` protocol over a draft, ids past its columns clamped."""

    def __init__(self, model: Any):
        self.model = model

    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        logits: torch.Tensor = self.model.forward(ids.clamp_max(self.model.vocab_size - 1), keep)
        return logits

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


def fitted(draft: Any, target: Any) -> Any:
    """`draft` as it is where its columns cover the target's, else a `NarrowDraft`."""
    if draft.vocab_size >= target.vocab_size:
        return draft
    return NarrowDraft(draft)
