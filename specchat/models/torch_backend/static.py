"""A static, position-indexed KV cache behind the engine's `CausalModel` protocol.

Keys and values live in buffers preallocated for `max_length` tokens (transformers'
`StaticCache` layers), written at positions `start + 0..n-1`, where `start` is one
device scalar shared by every layer. The causal mask hides everything past the
query positions, so rolling back is only moving `start` back: nothing is copied or
freed (gpt-fast's design).

Shapes never change, which is what lets CUDA capture the steps as graphs: on CUDA
the forward is compiled with `torch.compile(mode="reduce-overhead")`. To keep the
number of captured graphs small, inputs are padded to a few bucket widths (1, 2,
3, 5, 9, 17, ...); the padding writes only past the new position, where the mask
hides it and the next forward overwrites it.

On CPU the lean forward (`lean.LeanLlama`) is the default where the architecture
allows, else the eager `HFCausalModel` (DynamicCache): attending over this module's
whole preallocated length costs more there than it saves. `models.adapters` picks one.
Knows nothing about decoding or text.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from specchat.errors import ContextFull
from specchat.models.torch_backend.hf import HFCausalModel

DEFAULT_MAX_LENGTH = 4096
BUCKETS = (1, 2, 3, 5, 9, 17, 33)
"""Widths a compiled forward is captured at: one draft step, a catch-up, and k + 1 verifies."""
PREFILL_EAGER_ABOVE = BUCKETS[-1]
CAPTURE_MODES = ("graphs", "reduce-overhead", "cudagraphs", "none")
StepOutput = torch.Tensor | tuple[torch.Tensor, torch.Tensor]
"""What a step (`_logits`) returns: its logits, or (logits, final hidden states) where a
subclass keeps the features a draft head reads (static_llama.py)."""
"""How steps are captured on CUDA (the pair key `cuda_graphs`): graphs (explicit
torch.cuda.CUDAGraph, the default for specchat's own Llama-family forward), reduce-overhead
(inductor + CUDA graphs, the default for transformers' forward), cudagraphs (CUDA graphs of
the traced model without inductor: much faster to start), none."""


def bucket(width: int) -> int:
    return next((b for b in BUCKETS if b >= width), width)


def positioned_update(layer, key_states, value_states, *args, **kwargs):
    """StaticLayer.update writing at the shared `start` instead of a per-layer counter."""
    if not layer.is_initialized:
        layer.lazy_initialization(key_states, value_states)
    positions = layer.start + torch.arange(key_states.shape[-2], device=layer.keys.device)
    layer.keys.index_copy_(2, positions, key_states)
    layer.values.index_copy_(2, positions, value_states)
    return layer.keys, layer.values


def positioned_cache(config, max_length: int, start: torch.Tensor, dtype: torch.dtype):
    """A transformers StaticCache whose layers all write at `start`, allocated now: left to
    the first forward, a compiled one, its buffers would miss the static addresses CUDA
    graphs need (transformers skips `mark_static_address` while tracing)."""
    import types

    from transformers import StaticCache

    cache = StaticCache(config=config, max_cache_len=max_length)
    layers: list[Any] = list(cache.layers)  # each patched to write at the shared position
    for layer in layers:
        layer.start = start
        layer.cumulative_length = start  # what get_seq_length reports: the same shared position
        layer.update = types.MethodType(positioned_update, layer)
    cache.early_initialization(1, *kv_shape(config), dtype, start.device)
    return cache


class StaticCausalModel(HFCausalModel):
    """A transformers model over a static KV cache; rollback = not advancing the position."""

    DEFAULT_CAPTURE = "reduce-overhead"

    def __init__(self, model, vocab_size: int | None = None, max_length: int | None = None,
                 compile_steps: bool | None = None, buckets: bool | None = None,
                 capture: str = "auto"):
        super().__init__(model, vocab_size)
        self.capture = capture if capture in CAPTURE_MODES else self.DEFAULT_CAPTURE
        """How steps are captured on CUDA (one of CAPTURE_MODES)."""
        self.max_length = max_length or static_length(self.config)
        """The tokens the cache holds: also the pair's context (`LoadedPair.context_length`)."""
        self.compiled = self.device.type == "cuda" if compile_steps is None else compile_steps
        self.buckets = self.compiled if buckets is None else buckets
        self._start = torch.zeros((), dtype=torch.long, device=self.device)
        if self.device.type == "cuda":
            import torch._dynamo as dynamo

            dynamo.mark_static_address(self._start)  # graphs read it in place
        self._position = 0
        self._step = self._compile() if self.compiled else self._logits
        self.compile_error: str | None = None

    @property
    def cache_length(self) -> int:
        return self._position

    @property
    def context_limit(self) -> int:
        """The longest sequence this adapter can hold: the static cache's size."""
        return self.max_length

    @property
    def kv_cache_bytes(self) -> int:
        return kv_bytes(self.config, self.max_length, self.model.dtype)

    def reset(self) -> None:
        if self._cache is None:
            self._cache = positioned_cache(self.config, self.max_length, self._start, self.model.dtype)
        self.crop(0)

    def _compile(self):
        import torch._dynamo

        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        how = self.capture
        if how == "none":
            self.compiled = False
            return self._logits
        if how == "cudagraphs":
            return torch.compile(self._logits, backend="cudagraphs", dynamic=False)
        return torch.compile(self._logits, mode="reduce-overhead", fullgraph=False, dynamic=False)

    def _logits(self, ids: torch.Tensor, keep: int) -> StepOutput:
        positions = self._start + torch.arange(ids.shape[-1], device=ids.device)
        out = self.model(input_ids=ids, past_key_values=self._cache, use_cache=True,
                         cache_position=positions, position_ids=positions.unsqueeze(0),
                         logits_to_keep=keep)
        return out.logits[0, -keep:, : self.vocab_size].float()

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        if self._cache is None:
            self.reset()
        ids = ids.reshape(-1).to(self.device)
        n, start, fed = int(ids.shape[0]), self._position, ids
        if self._position + n > self.max_length:
            raise ContextFull(f"the static KV cache of {self.max_length} tokens is full "
                              f"({self._position} + {n} tokens): start a new chat or shorten it")
        width, captured = self._width(n)
        if width > n:  # pad past the new position: hidden by the mask, overwritten next time
            ids = torch.cat([ids, ids[-1:].expand(width - n)])
        out = self._run(ids.reshape(1, -1), width, captured)
        self._advance(n)
        self.held.fed(start, fed)
        return self._kept(out, n, keep)

    def _kept(self, out: StepOutput, n: int, keep: int) -> torch.Tensor:
        """The logits of the last `keep` of the `n` tokens fed (the rows past them padding)."""
        assert isinstance(out, torch.Tensor), "this model's steps return logits only"
        return out[n - keep:n]

    def _width(self, n: int) -> tuple[int, bool]:
        """(width `n` tokens run at, whether that width is a captured step): the bucket,
        or `n` itself run eagerly where the padding would not fit in the cache."""
        step = n <= PREFILL_EAGER_ABOVE
        width = bucket(n) if self.buckets and step else n
        if self._position + width > self.max_length:
            return n, False
        return width, step

    def _run(self, ids: torch.Tensor, width: int, captured: bool) -> StepOutput:
        if not (self.compiled and captured):
            return self._logits(ids, width)
        try:
            # graph outputs are overwritten by the next replay
            return cloned(self._step(ids, width))
        except Exception as error:  # a model torch.compile cannot capture: stay correct, go eager
            self.compiled, self.compile_error = False, f"{type(error).__name__}: {error}"
            print(f"specchat: CUDA graph capture failed, decoding eagerly ({self.compile_error})",
                  file=sys.stderr)
            return self._logits(ids, width)

    def _advance(self, n: int) -> None:
        self._position += n
        self._start.fill_(self._position)

    def prepare(self, widths: int = 17, context: int = 8, longest: int | None = None) -> None:
        """Run (on CUDA: capture) every step width up to `widths` now, not mid-answer (one
        attention span here, whatever `longest` the answers reach)."""
        self.reset()
        self.forward(torch.zeros(context, dtype=torch.long, device=self.device))
        shapes = sorted({bucket(w) if self.buckets else w for w in range(1, widths + 1)})
        for width in shapes:
            for _ in range(3 if self.compiled else 1):  # cudagraph trees record on a later call
                self.forward(torch.zeros(width, dtype=torch.long, device=self.device), keep=width)
                self.crop(context)
        self.reset()

    def crop(self, length: int) -> None:
        """Move the write position back; the mask hides whatever lies past it."""
        self._position = min(self._position, max(0, length))
        self._start.fill_(self._position)
        self.held.crop(self._position)


def cloned(out):
    """A copy of a forward's output: a tensor, or a tuple of them."""
    return tuple(t.clone() for t in out) if isinstance(out, tuple) else out.clone()


def static_length(config, limit: int | None = None) -> int:
    """Tokens a static cache holds for `config`: its context, at most `limit` (default
    DEFAULT_MAX_LENGTH: the cache is allocated whole, and a 128k context would not fit
    beside an 8B model)."""
    limit = limit or DEFAULT_MAX_LENGTH
    context = int(getattr(config, "max_position_embeddings", 0) or limit)
    return min(context, limit)


def kv_shape(config) -> tuple[int, int]:
    """(key/value heads, head dimension) of every layer."""
    heads = int(getattr(config, "num_key_value_heads", None) or config.num_attention_heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
    return heads, head_dim


def kv_bytes(config, tokens: int, dtype: torch.dtype) -> int:
    """Bytes of keys and values for `tokens` positions of every layer."""
    heads, head_dim = kv_shape(config)
    element = torch.empty((), dtype=dtype).element_size()
    return 2 * int(config.num_hidden_layers) * heads * head_dim * tokens * element
