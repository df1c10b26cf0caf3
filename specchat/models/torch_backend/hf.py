"""Adapts a Hugging Face causal LM to the engine's `CausalModel` protocol.

The adapter owns a `DynamicCache`; `crop` removes tokens from its end. Logits are
returned as float32 for the last `keep` positions only (`logits_to_keep`), so a
long prefill never materialises a full-vocabulary row per prompt token.
"""

from __future__ import annotations

from typing import Any

import torch

from specchat.engine.protocol import HeldTokens


class HFCausalModel:
    """A transformers model behind the engine's small model protocol."""

    def __init__(self, model, vocab_size: int | None = None):
        self.model = model.eval()
        self.config = model.config
        self.device = next(model.parameters()).device
        self.vocab_size = vocab_size or model.get_output_embeddings().weight.shape[0]
        self._cache: Any = None
        """transformers' DynamicCache, made by `reset` (on the first forward)."""
        self.held = HeldTokens()
        """The ids the cache holds, recorded as they are fed (engine/protocol.py's `HeldTokens`)."""

    @property
    def cache_length(self) -> int:
        """Read from the cache itself, so the engine's invariant check is real."""
        return 0 if self._cache is None else int(self._cache.get_seq_length())

    @property
    def context_limit(self) -> int:
        """The longest sequence the model was made for (its cache grows to fit)."""
        return int(getattr(self.config, "max_position_embeddings", 0) or 2048)

    @property
    def kv_cache_bytes(self) -> int:
        """Bytes of keys and values held now."""
        if self._cache is None:
            return 0
        return sum(t.numel() * t.element_size() for layer in self._cache.layers
                   for t in (getattr(layer, "keys", None), getattr(layer, "values", None))
                   if isinstance(t, torch.Tensor))

    @property
    def parameter_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.model.parameters())

    def reset(self) -> None:
        from transformers import DynamicCache

        self._cache = DynamicCache(config=self.config)
        self.held.clear()

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        if self._cache is None:
            self.reset()
        ids, start = ids.reshape(1, -1).to(self.device), self.cache_length
        out = self.model(input_ids=ids, past_key_values=self._cache, use_cache=True,
                         logits_to_keep=keep)
        self.held.fed(start, ids)
        # under an accelerate device_map the head may sit elsewhere: logits live on `device`
        return out.logits[0, -keep:, : self.vocab_size].float().to(self.device)

    def crop(self, length: int) -> None:
        surplus = self.cache_length - length
        if surplus > 0:
            self._cache.crop(-surplus)
        self.held.crop(length)
