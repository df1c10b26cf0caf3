"""The small model protocols the engine decodes with.

A model owns its KV cache. `forward` appends tokens to the cache and returns
float32 logits for the last `keep` of them; `crop` rolls the cache back. A target
that keeps its final hidden states is also a `FeatureSource`, and a `DraftHead`
drafts from them (engine/head_drafter.py). A model may also keep a `HeldTokens` record of
the ids its cache holds, as `held`: the next answer then keeps what it holds of its prompt
(engine/held_tokens.py). The engine never sees how a model is stored, loaded or quantized,
and knows nothing about text.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


class HeldTokens:
    """The ids in a model's cache, in order, as the model itself records them: every forward,
    crop and reset notes them here, so no other code can leave the record stale. The ids are
    kept as the tensors the model was fed (reading a GPU tensor on the host at every forward
    would be a sync a round) and read on the host once, when a new prompt asks how much of
    it is held."""

    def __init__(self) -> None:
        self._pieces: list[torch.Tensor] = []
        self.length = 0

    def clear(self) -> None:
        """The cache was emptied."""
        self._pieces, self.length = [], 0

    def fed(self, start: int, ids: torch.Tensor) -> None:
        """The model appended `ids` after the first `start` tokens of its cache. A record
        shorter than `start` cannot say what the cache holds: it is marked unknown (a length
        that matches no cache) until the next `clear`."""
        if self.length < start:
            self._pieces, self.length = [], -1
            return
        self.crop(start)
        piece = ids.detach().reshape(-1)
        self._pieces.append(piece)
        self.length += int(piece.shape[0])

    def crop(self, length: int) -> None:
        """The cache was rolled back to its first `length` tokens (none: it is empty, which
        an unknown record then knows too)."""
        if length <= 0:
            self.clear()
            return
        if self.length < 0 or length >= self.length:
            return
        excess = self.length - length  # from the end: a rollback drops the last few ids
        while excess > 0:
            last = self._pieces[-1]
            if last.shape[0] <= excess:
                excess -= int(self._pieces.pop().shape[0])
            else:
                self._pieces[-1], excess = last[: last.shape[0] - excess], 0
        self.length = length

    def ids(self) -> list[int]:
        """The held ids as host ints (one copy from the device; the pieces become one)."""
        if self.length <= 0:
            return []
        device = self._pieces[0].device
        whole = torch.cat([piece.to(device) for piece in self._pieces])
        self._pieces = [whole]
        return [int(token) for token in whole.tolist()]


@runtime_checkable
class CausalModel(Protocol):
    """A causal language model with a KV cache that can be rolled back."""

    vocab_size: int
    device: torch.device

    @property
    def cache_length(self) -> int:
        """Number of tokens whose keys and values are in the cache."""
        ...

    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        """Append `ids` (shape [n]) to the cache; return logits [keep, vocab] (float32)."""
        ...

    def crop(self, length: int) -> None:
        """Roll the cache back so it holds exactly `length` tokens."""
        ...

    def reset(self) -> None:
        """Empty the cache."""
        ...


@runtime_checkable
class FeatureSource(Protocol):
    """A target that keeps the final hidden states of its last forward: what a draft head reads
    (at no cost: the forward computed them to make its logits)."""

    features: torch.Tensor | None
    """[n, hidden]: the final hidden states (after the last norm: what the output matrix
    multiplies) of every one of the n tokens the last `forward` fed, in order; None before
    the first."""


@runtime_checkable
class DraftHead(Protocol):
    """A draft head (EAGLE): a small network over the target's features with a KV cache of
    its own rows. Row p reads the target's feature at p - 1 (zeros for p = 0) and token p,
    and guesses the feature at p, whose logits give the token at p + 1."""

    vocab_size: int
    device: torch.device
    hidden_size: int
    """The width of the features it reads (the target's hidden size)."""

    @property
    def cache_length(self) -> int:
        """Rows in the head's cache (rows 0..cache_length - 1)."""
        ...

    def forward(self, features: torch.Tensor, ids: torch.Tensor,
                keep: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """Append rows (`features` [n, hidden], `ids` [n]); (logits [keep, vocab] float32,
        the head's feature guesses [keep, hidden]) of the last `keep` rows."""
        ...

    def crop(self, length: int) -> None:
        """Roll the cache back so it holds exactly `length` rows."""
        ...

    def reset(self) -> None:
        """Empty the cache."""
        ...
