"""Two tokenizers side by side: what each token spells, and the tokens both have.

The *intersection* is the draft tokens that spell exactly what one target token spells
(special tokens only with special tokens of the same content, such as `<|im_end|>`): the
vocabulary token-level intersection (TLI, Timor et al., ICML 2025) samples from. A draft
EOS the target has no token for stands for the target's own EOS. `target_row` pushes a
distribution over the draft's columns onto the target's (several draft tokens spelling one
target token add up), which is what verification compares p with. Built once per pair of
tokenizers (`cross_vocabulary` remembers a few). Knows token ids and bytes, no models.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

from specchat.chat.cross.pieces import TokenPieces


class CrossVocabulary:
    """A draft tokenizer's and a target tokenizer's pieces, and the draft -> target map."""

    def __init__(self, draft: TokenPieces, target: TokenPieces, draft_columns: int,
                 target_columns: int):
        self.draft, self.target = draft, target
        self.draft_columns, self.target_columns = draft_columns, target_columns
        to_target = self._map()
        self.to_target = torch.tensor(to_target, dtype=torch.long)
        """draft id -> the target id spelling the same (-1: none), over the draft's columns."""
        self.mapped = self.to_target >= 0
        self.mapped_ids = self.mapped.nonzero().flatten()
        self.mapped_targets = self.to_target[self.mapped_ids]

    def _map(self) -> list[int]:
        normal, special = self._target_index()
        to_target = [-1] * self.draft_columns
        for draft_id in range(min(self.draft_columns, len(self.draft))):
            piece = self.draft.pieces[draft_id]
            table = special if draft_id in self.draft.special else normal
            to_target[draft_id] = table.get(piece, -1) if piece else -1
        eos = self.target.tokenizer.eos_token_id
        for draft_eos in end_ids(self.draft.tokenizer):
            if draft_eos < self.draft_columns and to_target[draft_eos] < 0 and eos is not None:
                to_target[draft_eos] = int(eos)
        return to_target

    def _target_index(self) -> tuple[dict[bytes, int], dict[bytes, int]]:
        """(piece -> the first target id spelling it, special content -> special id)."""
        normal: dict[bytes, int] = {}
        special: dict[bytes, int] = {}
        for target_id in range(min(self.target_columns, len(self.target))):
            piece = self.target.pieces[target_id]
            if piece:
                table = special if target_id in self.target.special else normal
                table.setdefault(piece, target_id)
        return normal, special

    @property
    def size(self) -> int:
        """How many draft tokens have a target token of their own."""
        return int(self.mapped_ids.numel())

    def target_row(self, q: torch.Tensor) -> torch.Tensor:
        """A distribution over the draft's columns (zero off the intersection) as one over
        the target's columns."""
        row = torch.zeros(self.target_columns, dtype=q.dtype, device=q.device)
        return row.index_add_(0, self.mapped_targets.to(q.device), q[self.mapped_ids.to(q.device)])


def end_ids(tokenizer: Any) -> set[int]:
    """A tokenizer's end-of-sequence ids (its EOS; none where it names none)."""
    eos = getattr(tokenizer, "eos_token_id", None)
    return set() if eos is None else {int(eos)}


@lru_cache(maxsize=4)
def cross_vocabulary(target_tokenizer: Any, draft_tokenizer: Any, target_columns: int,
                     draft_columns: int) -> CrossVocabulary:
    """The `CrossVocabulary` of two tokenizers (built once: a large vocabulary takes a
    fraction of a second; every answer's drafter asks for it)."""
    return CrossVocabulary(TokenPieces(draft_tokenizer), TokenPieces(target_tokenizer),
                           draft_columns, target_columns)
