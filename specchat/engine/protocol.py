"""The small model protocols the engine decodes with.

A model owns its KV cache. `forward` appends tokens to the cache and returns
float32 logits for the last `keep` of them; `crop` rolls the cache back. A target
that keeps its final hidden states is also a `FeatureSource`, and a `DraftHead`
drafts from them (engine/head_drafter.py). The engine never sees how a model is
stored, loaded or quantized, and knows nothing about text.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


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
