"""The small model protocol the engine decodes with.

A model owns its KV cache. `forward` appends tokens to the cache and returns
float32 logits for the last `keep` of them; `crop` rolls the cache back. The
engine never sees how a model is stored, loaded or quantized, and knows nothing
about text.
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
