"""specchat's own forward for the Llama family over a static, position-indexed KV cache.

For Llama, Mistral, Qwen2 and SmolLM on a GPU: the model's own modules (embedding,
norms, projections, rotary tables, head) are called in a plain ladder, as gpt-fast
writes it; what is specchat's is the cache and the attention. Keys and values live
in one buffer per model, [layers, kv_heads, max_length, head_dim], written at
positions `start + 0..n-1` (`start` is one device scalar); attention is PyTorch's
`scaled_dot_product_attention` over the buffer's first `span` positions (the
smallest of 256, 512, ... max_length holding every position written) with a boolean
mask that hides every key past its query. Rolling back is only moving `start`:
nothing is copied.

Every shape is fixed, so on CUDA each (step width, span) is captured once as an explicit
`torch.cuda.CUDAGraph` (one memory pool for all; the time it took is kept in
`capture_s`), and replayed with the new ids copied into its input buffer. With the pair
key `cuda_graphs = "reduce-overhead"` or `"cudagraphs"` the same forward goes through
`torch.compile` instead, so the two can be measured against each other. On the CPU
this forward runs eagerly (the tests compare it with transformers in float32).
Other architectures keep transformers' forward over its StaticCache
(`static.StaticCausalModel`). Knows nothing about decoding or text.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F

from specchat.models.blocks.logits import scatter_logits
from specchat.models.torch_backend.lean import rotate
from specchat.models.torch_backend.static import StaticCausalModel, StepOutput, bucket

FAMILY = ("llama", "mistral", "qwen2")
FIRST_SPAN = 256
"""Attention reads the cache up to the smallest span (256, 512, ... max_length) that holds
the positions written: a short chat does not stream a 4096-token cache every step."""
DYNAMIC_ROPE = ("dynamic", "longrope")
"""Rope types whose tables depend on the sequence length: not capturable as fixed shapes."""


def owned_problem(model, max_length: int | None = None) -> str | None:
    """Why `model` cannot run on specchat's own static forward (None when it can)."""
    config = model.config
    kind = getattr(config, "model_type", None)
    if kind not in FAMILY:
        return f"model type {kind!r} is not in the Llama family"
    if getattr(config, "hidden_act", "silu") != "silu":
        return f"activation {config.hidden_act!r}"
    if getattr(config, "pretraining_tp", 1) not in (None, 1):
        return "tensor-parallel weight slices (pretraining_tp)"
    rope = (getattr(config, "rope_scaling", None) or {}).get("rope_type")
    if rope in DYNAMIC_ROPE:
        return f"rope type {rope!r}"
    window = getattr(config, "sliding_window", None)
    if window and getattr(config, "use_sliding_window", True) and window < (max_length or 0):
        return f"a sliding attention window of {window} tokens"
    if getattr(model, "hf_device_map", None) and len(set(model.hf_device_map.values())) > 1:
        return "layers spread over several devices"
    if any(p.dtype not in (torch.float32, torch.bfloat16, torch.float16) for p in model.parameters()):
        return "quantized weights"
    return None


class StaticLlama(StaticCausalModel):
    """A Llama-family model over specchat's static KV buffer; SDPA; CUDA graphs on CUDA."""

    DEFAULT_CAPTURE = "graphs"

    def __init__(self, model, vocab_size: int | None = None, max_length: int | None = None,
                 compile_steps: bool | None = None, buckets: bool | None = None,
                 capture: str = "auto", head_ids: list[int] | None = None):
        body = model.get_decoder()
        self.body, self.head = body, model.get_output_embeddings()
        self.vocab, self.head_rows = head_rows(self.head.weight, head_ids)
        """A draft's reduced output vocabulary (sorted ids on the device) and only those rows
        of the head; None, None: the whole head."""
        attn = body.layers[0].self_attn
        self.head_dim, self.scaling = int(attn.head_dim), float(attn.scaling)
        self.heads = int(model.config.num_attention_heads)
        self.kv_heads = int(getattr(model.config, "num_key_value_heads", None) or self.heads)
        self.keys: torch.Tensor | None = None
        """[layers, kv heads, max_length, head dim], allocated by the first `reset`."""
        self.values: torch.Tensor | None = None
        self.features: torch.Tensor | None = None
        """[n, hidden]: the final hidden states of the n tokens the last forward fed."""
        self._span = FIRST_SPAN
        self.capture_s = 0.0
        """Seconds spent capturing CUDA graphs (or compiling) so far."""
        super().__init__(model, vocab_size, max_length, compile_steps, buckets, capture)
        self.spans = spans_up_to(self.max_length)

    def reset(self) -> None:
        if self.keys is None:
            shape = (len(self.body.layers), self.kv_heads, self.max_length, self.head_dim)
            dtype = self.body.embed_tokens.weight.dtype
            self.keys = torch.zeros(shape, dtype=dtype, device=self.device)
            self.values = torch.zeros_like(self.keys)
            self._cache = self.keys  # what the parent checks for "allocated"
        self.crop(0)

    @property
    def kv_cache_bytes(self) -> int:
        if self.keys is None:
            return super().kv_cache_bytes
        return 2 * self.keys.numel() * self.keys.element_size()

    def _compile(self):
        how = self.capture
        if how == "none":
            self.compiled = False
            return self._logits
        if how == "graphs":
            return GraphSteps(self._logits, self)
        return timed_compile(self._logits, how, self)

    def _run(self, ids: torch.Tensor, width: int, captured: bool) -> StepOutput:
        end = self._position + width
        self._span = span_for(self.spans, end)
        return super()._run(ids, width, captured)

    def prepare(self, widths: int = 17, context: int = 8, longest: int | None = None) -> None:
        """Run (on CUDA: capture) every step width at every attention span a sequence of up to
        `longest` tokens reaches (None: every span), now. A span first reached later is
        captured then, mid-answer."""
        self.reset()
        for span in spans_reached(self.spans, longest):
            shapes = sorted({min(bucket_of(self, w), span) for w in range(1, widths + 1)})
            for width in shapes:
                for _ in range(3 if self.compiled else 1):
                    self._seek(span - width)
                    self.forward(torch.zeros(width, dtype=torch.long, device=self.device), keep=width)
        self.reset()

    def _seek(self, position: int) -> None:
        """Put the write position anywhere (prepare only: what lies before it is garbage)."""
        self._position = position
        self._start.fill_(position)

    def _kept(self, out: StepOutput, n: int, keep: int) -> torch.Tensor:
        """The logits of the last `keep` of the `n` tokens fed; their final hidden states are
        kept as `features` (engine/protocol.py's `FeatureSource`: a draft head reads them)."""
        assert isinstance(out, tuple), "this model's steps return (logits, hidden states)"
        logits, hidden = out
        self.features = hidden[:n]
        return logits[n - keep:n]

    def _logits(self, ids: torch.Tensor, keep: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits, final hidden states) of the last `keep` of `ids` [1, n], writing their
        keys/values at `start`."""
        ids = ids.reshape(-1)
        positions = self._start + torch.arange(ids.shape[0], device=ids.device)
        x = self.body.embed_tokens(ids)
        cos, sin = self.body.rotary_emb(x.unsqueeze(0), positions.unsqueeze(0))
        span = self._span
        visible = torch.arange(span, device=ids.device) <= positions.unsqueeze(1)
        for index, layer in enumerate(self.body.layers):
            x = self._layer(index, layer, x, cos[0], sin[0], positions, visible, span)
        hidden = self.body.norm(x[-keep:])
        if self.vocab is not None:  # a reduced head: those rows only, -inf elsewhere
            logits = scatter_logits((hidden @ self.head_rows.T).float(), self.vocab,
                                    self.vocab_size)
            return logits, hidden
        return self.head(hidden)[:, : self.vocab_size].float(), hidden

    def _layer(self, index: int, layer, x, cos, sin, positions, visible, span: int):
        n, attn, keys, values = x.shape[0], layer.self_attn, self.keys, self.values
        assert keys is not None and values is not None, "reset allocates the buffers"
        h = layer.input_layernorm(x)
        q = rotate(attn.q_proj(h).view(n, self.heads, self.head_dim).transpose(0, 1), cos, sin)
        k = rotate(attn.k_proj(h).view(n, self.kv_heads, self.head_dim).transpose(0, 1), cos, sin)
        v = attn.v_proj(h).view(n, self.kv_heads, self.head_dim).transpose(0, 1)
        keys[index].index_copy_(1, positions, k.to(keys.dtype))
        values[index].index_copy_(1, positions, v.to(values.dtype))
        out = F.scaled_dot_product_attention(
            q.unsqueeze(0), keys[index, :, :span].unsqueeze(0),
            values[index, :, :span].unsqueeze(0),
            attn_mask=visible, scale=self.scaling, enable_gqa=self.kv_heads != self.heads)
        x = x + attn.o_proj(out[0].transpose(0, 1).reshape(n, self.heads * self.head_dim))
        return x + layer.mlp(layer.post_attention_layernorm(x))


def head_rows(weight: torch.Tensor, head_ids: list[int] | None):
    """(sorted ids on the weight's device, those rows of the head), or (None, None)."""
    if head_ids is None:
        return None, None
    vocab = torch.tensor(sorted(head_ids), dtype=torch.long, device=weight.device)
    return vocab, weight.detach()[vocab].contiguous()


class GraphSteps:
    """Each step width captured once as a CUDA graph, replayed with new input ids."""

    def __init__(self, forward, owner: StaticLlama):
        self.forward, self.owner = forward, owner
        self.graphs: dict[tuple[int, int], tuple] = {}
        """(width, attention span) -> (input buffer, graph, output buffer)."""
        self.pool: Any = None
        """torch's memory pool the graphs share (made at the first capture)."""

    def __call__(self, ids: torch.Tensor, keep: int) -> torch.Tensor:
        key = (keep, self.owner._span)
        entry = self.graphs.get(key)
        if entry is None:
            entry = self.graphs[key] = self._capture(ids, keep)
        inputs, graph, output = entry
        inputs.copy_(ids)
        graph.replay()
        return output

    def _capture(self, ids: torch.Tensor, keep: int):
        started = time.perf_counter()
        inputs = ids.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up off the capture: kernels pick their algorithms
            for _ in range(2):
                self.forward(inputs, keep)
        torch.cuda.current_stream().wait_stream(side)
        self.pool = self.pool or torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            output = self.forward(inputs, keep)
        torch.cuda.synchronize()
        self.owner.capture_s += time.perf_counter() - started
        return inputs, graph, output


def span_for(spans: list[int], end: int) -> int:
    """The attention span a step ending at position `end` reads: the smallest that holds it
    (`spans` end with the cache's length)."""
    return next((s for s in spans if s >= end), spans[-1])


def spans_reached(spans: list[int], longest: int | None) -> list[int]:
    """The attention spans a sequence of up to `longest` tokens uses (None: all of them)."""
    if longest is None:
        return list(spans)
    return [s for s in spans if s <= span_for(spans, longest)]


def spans_up_to(max_length: int) -> list[int]:
    """256, 512, ... up to and including `max_length`."""
    spans, span = [], FIRST_SPAN
    while span < max_length:
        spans.append(span)
        span *= 2
    return spans + [max_length]


def bucket_of(model: StaticCausalModel, width: int) -> int:
    return bucket(width) if model.buckets else width


def timed_compile(forward, how: str, owner: StaticLlama):
    """torch.compile of the forward; the first call at each width (the capture) is timed."""
    if how == "cudagraphs":
        compiled = torch.compile(forward, backend="cudagraphs", dynamic=False)
    else:
        compiled = torch.compile(forward, mode="reduce-overhead", fullgraph=False, dynamic=False)
    seen: set[tuple[int, int]] = set()

    def step(ids: torch.Tensor, keep: int) -> torch.Tensor:
        key = (keep, owner._span)  # a new span is a new graph (dynamo guards on it)
        if key in seen:
            return compiled(ids, keep)
        started = time.perf_counter()
        out = compiled(ids, keep)
        torch.cuda.synchronize()
        seen.add(key)
        owner.capture_s += time.perf_counter() - started
        return out

    return step
