"""Drafting with a head that reads the target's own features (EAGLE), at no extra target work.

The target's forwards compute its final hidden states anyway (a `FeatureSource` keeps those
of its last forward); the decoder tells the drafter after each one where it started
(`target_fed`), and the drafter keeps the features of the committed positions the head has
not read yet. A proposal first feeds the head one row per committed token it lacks (row p:
the feature at p - 1 and token p), then drafts k tokens autoregressively on its own guesses:
draft i + 1 reads the feature the head guessed for draft i. Rows fed with guesses are
never kept: after the verdict the head is rolled back to the rows read from real features,
and the next proposal feeds the newly committed ones from the verify's own features.

Where the features a proposal needs are not there yet (the first round of an answer, whose
prompt the target has not read), it proposes nothing and the round is a plain step.
Verification is the decoder's, unchanged. Knows nothing about text or how heads are made.
"""

from __future__ import annotations

from typing import Callable

import torch

from specchat.engine.drafters import ModelDrafter, Proposal, empty_proposal
from specchat.engine.held_tokens import kept_prefix
from specchat.engine.params import SamplingParams
from specchat.engine.protocol import DraftHead, FeatureSource


class HeadDrafter:
    """Drafts with a `DraftHead` over a `FeatureSource` target (module docstring)."""

    max_cache_lag = 0

    def __init__(self, head: DraftHead, source: FeatureSource):
        self.head = head
        self.source = source
        self._known: torch.Tensor | None = None
        """The target's features of positions `_start`.. that the head may still need."""
        self._start = 0
        self._real_rows = 0
        """Rows of the head's cache read from real features (those a rollback keeps)."""

    def reset(self) -> None:
        self.head.reset()
        self._known, self._start, self._real_rows = None, 0, 0

    def resume(self, prompt: list[int], kept: int) -> int:
        """A new answer whose prompt's first `kept` tokens the target still holds: keep the
        head's rows that read the prompt (by the head's own record; any drafter over the head
        may have fed them, the chat makes one per answer), and
        have the target read again from where the next row's feature is missing. Rows
        0..r - 1 read features up to r - 2; the target's forward from position t gives those
        from t on, so row r needs t <= r - 1: the target keeps min(kept, r - 1) tokens and
        the head min(r, that + 1) rows (one token read again, where the answer before read
        everything the head did)."""
        rows = kept_prefix(self.head, prompt)  # an answer's last rollback kept real rows only
        target_keeps = min(kept, max(rows - 1, 0))
        self._real_rows = min(rows, target_keeps + 1)
        self.head.crop(self._real_rows)
        self._known, self._start = None, 0
        return target_keeps

    def settle(self, sequence: torch.Tensor) -> None:
        """The answer ended: read the committed tokens the head has not (a lookup round's, the
        last round's) in one forward, from the features the verifies left, so the next
        answer's target can keep everything it holds (`resume`)."""
        rows, length = self.head.cache_length, int(sequence.shape[0])
        features = self._features_for(rows, length)
        if features is not None:
            self.head.forward(features, sequence[rows:], keep=1)
            self._real_rows = length

    def target_fed(self, start: int) -> None:
        """The target's last forward fed tokens from position `start`: keep their features."""
        rows = getattr(self.source, "features", None)
        if rows is None:
            return
        if self._known is None or not self._start <= start <= self._end:
            self._known, self._start = rows, start
            return
        self._known = torch.cat([self._known[: start - self._start], rows])

    @property
    def _end(self) -> int:
        return self._start + (0 if self._known is None else int(self._known.shape[0]))

    def propose(self, sequence: torch.Tensor, k: int, params: SamplingParams,
                generator: torch.Generator | None,
                should_stop: Callable[[], bool] = lambda: False,
                committed: list[int] | None = None) -> Proposal:
        length = int(sequence.shape[0])
        features = self._features_for(self.head.cache_length, length)
        if features is None or k < 1 or should_stop():
            return empty_proposal(sequence.device)
        logits, guess = self.head.forward(features, sequence[self.head.cache_length:], keep=1)
        self._real_rows = length
        self._forget_before(length - 1)
        tokens: list[torch.Tensor] = []
        probs: list[torch.Tensor] = []
        while True:
            token, q = ModelDrafter._choose(logits, params, generator)
            tokens.append(token)
            if q is not None:
                probs.append(q)
            if len(tokens) == k or should_stop():
                break
            logits, guess = self.head.forward(guess, token, keep=1)
        return Proposal(torch.cat(tokens), None if params.greedy else torch.stack(probs))

    def _features_for(self, first_row: int, length: int) -> torch.Tensor | None:
        """The features rows first_row..length - 1 read (positions first_row - 1..length - 2;
        zeros before position 0), or None where some are not known."""
        if first_row >= length:
            return None
        lead = 1 if first_row == 0 else 0
        start, end = first_row - 1 + lead, length - 1
        known = torch.empty(0, 0)
        if end > start:
            if self._known is None or not self._start <= start or end > self._end:
                return None
            known = self._known[start - self._start:end - self._start]
        if not lead:
            return known
        hidden = known.shape[1] if known.numel() else self._hidden()
        if hidden is None:
            return None
        zeros = torch.zeros(1, hidden, dtype=self._dtype(), device=self.head.device)
        return torch.cat([zeros, known]) if known.numel() else zeros

    def _hidden(self) -> int | None:
        return None if self._known is None else int(self._known.shape[1])

    def _dtype(self) -> torch.dtype:
        return torch.float32 if self._known is None else self._known.dtype

    def _forget_before(self, position: int) -> None:
        if self._known is not None and position > self._start:
            self._known = self._known[position - self._start:]
            self._start = position

    def rollback(self, committed_length: int) -> None:
        """Keep the rows read from real features, and the features of committed positions
        the target fed (all but the newest committed token)."""
        self.head.crop(min(self.head.cache_length, self._real_rows, committed_length))
        if self._known is not None and self._end > committed_length - 1:
            self._known = self._known[: max(0, committed_length - 1 - self._start)]
