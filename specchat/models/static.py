"""A static, position-indexed KV cache behind the engine's `CausalModel` protocol.

The cache is preallocated for `max_length` tokens (transformers' `StaticCache`).
Every forward writes its keys and values at explicit positions and the causal
mask hides everything past them, so rolling back is only moving the position
back: nothing is copied or freed (gpt-fast's design). The shapes never change,
which is what lets CUDA capture the draft's one-token step and the target's
(k+1)-token verify as graphs: on CUDA the forward is compiled with
`torch.compile(mode="reduce-overhead")`, one graph per input length.

On CPU the eager `HFCausalModel` (DynamicCache) stays the default: attending over
the whole preallocated length costs more than it saves there. `adapter_for`
picks one. Knows nothing about decoding or text.
"""

from __future__ import annotations

import os

import torch

from specchat.models.hf import HFCausalModel

DEFAULT_MAX_LENGTH = 4096
FAST_PATH_ENV = "SPECCHAT_FAST_PATH"
"""1 forces the static cache (also on CPU), 0 forces the eager path, unset: CUDA only."""


class StaticCausalModel(HFCausalModel):
    """A transformers model over a static KV cache; rollback = not advancing the position."""

    def __init__(self, model, vocab_size: int | None = None, max_length: int | None = None,
                 compile_steps: bool | None = None):
        super().__init__(model, vocab_size)
        context = int(getattr(self.config, "max_position_embeddings", DEFAULT_MAX_LENGTH))
        self.max_length = max_length or min(context, DEFAULT_MAX_LENGTH)
        self.compiled = self.device.type == "cuda" if compile_steps is None else compile_steps
        self._position = 0
        self._step = self._compile() if self.compiled else self._logits

    @property
    def cache_length(self) -> int:
        return self._position

    def reset(self) -> None:
        if self._cache is None:
            from transformers import StaticCache

            self._cache = StaticCache(config=self.config, max_cache_len=self.max_length)
        self.crop(0)

    def _compile(self):
        import torch._dynamo

        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        return torch.compile(self._logits, mode="reduce-overhead", fullgraph=False, dynamic=False)

    def _logits(self, ids: torch.Tensor, positions: torch.Tensor, keep: int) -> torch.Tensor:
        out = self.model(input_ids=ids, past_key_values=self._cache, use_cache=True,
                         cache_position=positions, position_ids=positions.unsqueeze(0),
                         logits_to_keep=keep)
        return out.logits[0, -keep:, : self.vocab_size].float()

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        if self._cache is None:
            self.reset()
        n = int(ids.numel())
        if self._position + n > self.max_length:
            raise ValueError(f"static cache of {self.max_length} tokens is full "
                             f"({self._position} + {n}); raise max_length")
        positions = torch.arange(self._position, self._position + n, device=self.device)
        ids = ids.reshape(1, -1).to(self.device)
        step = self._step if n <= 16 or not self.compiled else self._logits  # prefill stays eager
        logits = step(ids, positions, keep)
        self._position += n
        return logits.clone() if self.compiled else logits

    def crop(self, length: int) -> None:
        """Move the write position back; the mask hides whatever lies past it."""
        self._position = min(self._position, max(0, length))
        if self._cache is None:
            return
        for layer in self._cache.layers:
            counter = getattr(layer, "cumulative_length", None)
            if isinstance(counter, torch.Tensor):
                counter.fill_(self._position)
            elif getattr(layer, "is_initialized", False):
                layer.cumulative_length = self._position


def fast_path_wanted(device: str) -> bool:
    """Static cache (and CUDA graphs) on CUDA unless SPECCHAT_FAST_PATH=0; forced by =1."""
    setting = os.environ.get(FAST_PATH_ENV, "").strip()
    if setting in ("0", "1"):
        return setting == "1"
    return device.startswith("cuda")


def adapter_for(model, device: str, vocab_size: int | None = None, quantized: bool = False):
    """The engine adapter for a loaded model: static + compiled on CUDA, eager elsewhere."""
    if quantized or not fast_path_wanted(device):
        return HFCausalModel(model, vocab_size)
    return StaticCausalModel(model, vocab_size)
