"""A lean Llama forward for the CPU: the model's own weights, fewer and faster kernels.

transformers' Llama forward serves every device, cache type and attention backend;
decoding one token at a time on a small CPU, its cost is the matrix-vector products
plus a few dozen small operations per layer. `LeanLlama` computes the same function
on the same weights (gpt-fast's approach: the model written out plainly):

- each projection's weight is prepacked once into oneDNN's blocked layout
  (`torch.ops.mkldnn._reorder_linear_weight`); its matrix-vector kernel is about
  1.5x faster than `F.linear` on this machine's bfloat16 and gives the same
  numbers. Where oneDNN is missing, or the model is too large to hold a second,
  packed copy of its weights, the plain weights are used;
- keys and values live in one preallocated buffer per layer that doubles when
  full; rolling back is only lowering the length (nothing is copied or freed);
- attention is two batched matmuls over the cached length with a float32 softmax,
  the causal mask built only when more than one token is fed;
- long inputs are fed in chunks, so a long prompt never builds a prompt-by-prompt
  score matrix.

It implements the engine's `CausalModel` protocol; `.model` stays the transformers
model, which the benchmark's transformers arms run on. A draft with a reduced
output vocabulary passes `head_ids`: only those head rows are multiplied and the
other logits are -inf (see `reduced_vocab`). Knows nothing about decoding or text.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from specchat.models.blocks.int8_rows import quantize_rows
from specchat.models.blocks.kv_buffer import CacheCursor, KVBuffer
from specchat.models.blocks.logits import scatter_logits

PACK_LIMIT_BYTES = 4 << 30
"""Packing keeps a second copy of every projection: only for models up to this size."""
PREFILL_CHUNK = 256
"""Longest run of tokens attended in one piece."""
SUPPORTED_ROPE = {None, "default", "linear", "llama3", "dynamic", "yarn", "longrope"}


@dataclass
class RowsOf:
    """A bias-free linear layer over `weight` (the reduced head's rows)."""

    weight: torch.Tensor
    bias: None = None


def lean_problem(model) -> str | None:
    """Why `model` cannot run lean (None when it can): only plain Llama-style models do."""
    config = model.config
    if getattr(config, "model_type", None) != "llama":
        return f"model type {getattr(config, 'model_type', None)!r} is not llama"
    if getattr(config, "mlp_bias", False):
        return "an MLP with biases"
    if getattr(config, "hidden_act", "silu") != "silu":
        return f"activation {config.hidden_act!r}"
    if getattr(config, "pretraining_tp", 1) not in (None, 1):
        return "tensor-parallel weight slices (pretraining_tp)"
    rope = (getattr(config, "rope_scaling", None) or {}).get("rope_type")
    if rope not in SUPPORTED_ROPE:
        return f"rope type {rope!r}"
    if model.device.type != "cpu":
        return f"device {model.device.type} (the lean forward is for the CPU)"
    if any(p.dtype not in (torch.float32, torch.bfloat16, torch.float16) for p in model.parameters()):
        return "quantized weights"
    return None


class Projection:
    """x -> x W^T + b for one weight, or one such output per weight of a stack (q, k, v).

    Where oneDNN can take the weights (`pack`), they are stacked and prepacked once,
    so q/k/v and gate/up cost one kernel call each. `int8` (bfloat16 drafts only)
    multiplies by a per-row int8 copy instead (`torch._weight_int8pack_mm`): half the
    bytes to stream and a few bfloat16 steps of difference in the result, which is
    fine for a draft, whose numbers never reach the output: verification decides
    every token. Otherwise each weight is its own `F.linear` on the model's own
    tensor, with no copy.
    """

    def __init__(self, linears, pack: bool, int8: bool = False):
        self.weights = [linear.weight.detach() for linear in linears]
        self.biases = [None if linear.bias is None else linear.bias.detach() for linear in linears]
        self.sizes = [int(w.shape[0]) for w in self.weights]
        stacked = torch.cat(self.weights) if len(self.weights) > 1 else self.weights[0]
        self.int8 = int8_weight(stacked) if int8 else None
        self.packed = pack_weight(stacked) if pack and self.int8 is None else None
        self.bias = stacked_bias(self.biases, self.weights)

    def __call__(self, x: torch.Tensor):
        if self.int8 is not None:
            y = torch._weight_int8pack_mm(x, *self.int8)
            y = y if self.bias is None else y + self.bias
        elif self.packed is not None:
            y = torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
        else:
            outs = tuple(F.linear(x, w, b) for w, b in zip(self.weights, self.biases))
            return outs if len(outs) > 1 else outs[0]
        return y.split(self.sizes, -1) if len(self.sizes) > 1 else y

    @property
    def extra_bytes(self) -> int:
        """Memory held beyond the model's own weights: the packed or the int8 copy."""
        numel = sum(w.numel() for w in self.weights)
        if self.int8 is not None:
            return numel + 2 * sum(self.sizes)
        return 0 if self.packed is None else numel * self.weights[0].element_size()


def stacked_bias(biases, weights) -> torch.Tensor | None:
    """The biases of a stack as one vector (zeros for a weight without one), or None."""
    if all(b is None for b in biases):
        return None
    return torch.cat([w.new_zeros(w.shape[0]) if b is None else b for b, w in zip(biases, weights)])


def int8_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(int8 rows, bfloat16 scales) with absmax / 127 per row, or None where the kernel cannot run."""
    if weight.device.type != "cpu" or weight.dtype != torch.bfloat16:
        return None
    if not hasattr(torch, "_weight_int8pack_mm"):
        return None
    rows, scale = quantize_rows(weight)
    return rows.contiguous(), scale.to(torch.bfloat16)


def pack_weight(weight: torch.Tensor) -> torch.Tensor | None:
    """The weight in oneDNN's layout for small batches, or None where oneDNN cannot take it."""
    if weight.device.type != "cpu" or weight.dtype not in (torch.float32, torch.bfloat16):
        return None
    if not torch.backends.mkldnn.is_available():
        return None
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight, 1)
    except (RuntimeError, AttributeError):
        return None


@dataclass
class LeanLayer:
    """One decoder layer's weights, as the lean forward uses them."""

    input_norm: torch.Tensor
    qkv: Projection
    o: Projection
    post_norm: torch.Tensor
    gate_up: Projection
    down: Projection

    @classmethod
    def of(cls, layer, pack: bool, int8: bool = False) -> LeanLayer:
        attn, mlp = layer.self_attn, layer.mlp
        return cls(layer.input_layernorm.weight.detach(),
                   Projection([attn.q_proj, attn.k_proj, attn.v_proj], pack, int8),
                   Projection([attn.o_proj], pack, int8),
                   layer.post_attention_layernorm.weight.detach(),
                   Projection([mlp.gate_proj, mlp.up_proj], pack, int8),
                   Projection([mlp.down_proj], pack, int8))

    def projections(self) -> list[Projection]:
        return [self.qkv, self.o, self.gate_up, self.down]


class LeanLlama:
    """A transformers Llama computed by a plain forward over a preallocated KV cache."""

    def __init__(self, model, vocab_size: int | None = None, head_ids: list[int] | None = None,
                 pack: bool | None = None, int8: bool = False):
        self.model = model.eval()
        self.config = model.config
        self.device = model.device
        self.vocab_size = vocab_size or model.get_output_embeddings().weight.shape[0]
        model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        self.packed = model_bytes <= PACK_LIMIT_BYTES if pack is None else pack
        body = model.get_decoder()
        self.int8 = int8
        """Projections and head through int8 copies of their weights (drafts only)."""
        self.layers = [LeanLayer.of(layer, self.packed, int8) for layer in body.layers]
        self.embed = body.embed_tokens.weight.detach()
        self.final_norm = body.norm.weight.detach()
        self.eps = float(self.config.rms_norm_eps)
        self.rotary = body.rotary_emb
        attn = body.layers[0].self_attn
        self.head_dim, self.scaling = int(attn.head_dim), float(attn.scaling)
        self.heads = int(self.config.num_attention_heads)
        self.kv_heads = int(self.config.num_key_value_heads)
        head = model.get_output_embeddings()
        self.vocab = None
        """The reduced output vocabulary (sorted ids), as in `ReducedVocabModel`; None: all."""
        if head_ids is not None:
            self.vocab = torch.tensor(sorted(head_ids), dtype=torch.long, device=self.device)
            head = RowsOf(head.weight.detach()[self.vocab].contiguous())
        self.head = Projection([head], self.packed, int8)
        self.kv = KVBuffer(len(self.layers), self.kv_heads, self.head_dim, self.embed.dtype,
                           self.device)
        self.cursor = CacheCursor()
        self.held = self.cursor.held
        """The ids the cache holds, recorded as they are fed (engine/protocol.py's `HeldTokens`)."""
        self.features: torch.Tensor | None = None
        """[n, hidden]: the final hidden states of the n tokens the last forward fed (what a
        draft head reads: engine/protocol.py's `FeatureSource`)."""

    @property
    def cache_length(self) -> int:
        return self.cursor.length

    @property
    def context_limit(self) -> int:
        return int(getattr(self.config, "max_position_embeddings", 0) or 2048)

    @property
    def kv_cache_bytes(self) -> int:
        """Bytes of the key/value buffer as allocated now (it doubles when full)."""
        return 2 * self.kv.keys.numel() * self.kv.keys.element_size()

    @property
    def parameter_bytes(self) -> int:
        own = sum(p.numel() * p.element_size() for p in self.model.parameters())
        packed = sum(p.extra_bytes for layer in self.layers for p in layer.projections())
        return own + packed + self.head.extra_bytes

    def reset(self) -> None:
        self.cursor.reset()

    def crop(self, length: int) -> None:
        """Lower the length; whatever lies past it is overwritten by the next forward."""
        self.cursor.crop(length)

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        ids = ids.reshape(-1).to(self.device)
        hidden = [self._feed(ids[start:start + PREFILL_CHUNK])
                  for start in range(0, int(ids.shape[0]), PREFILL_CHUNK)]
        self.features = rms_norm(torch.cat(hidden), self.final_norm, self.eps)
        return self._logits(self.features[-keep:])

    def _feed(self, ids: torch.Tensor) -> torch.Tensor:
        """Run `ids` through every layer, appending their keys and values; the last hidden states."""
        start, n = self.cursor.length, int(ids.shape[0])
        end = start + n
        self.kv.make_room(end)
        x = self.embed[ids]
        positions = torch.arange(start, end, device=self.device)
        cos, sin = self.rotary(x.unsqueeze(0), positions.unsqueeze(0))
        mask = causal_mask(start, n, self.device) if n > 1 else None
        for index, layer in enumerate(self.layers):
            x = self._layer(index, layer, x, cos[0], sin[0], mask, start, end)
        self.cursor.fed(start, ids)
        return x

    def _layer(self, index: int, layer: LeanLayer, x, cos, sin, mask, start: int, end: int):
        n = x.shape[0]
        q, k, v = layer.qkv(rms_norm(x, layer.input_norm, self.eps))
        q = rotate(q.reshape(n, self.heads, self.head_dim).transpose(0, 1), cos, sin)
        k = rotate(k.reshape(n, self.kv_heads, self.head_dim).transpose(0, 1), cos, sin)
        v = v.reshape(n, self.kv_heads, self.head_dim).transpose(0, 1)
        self.kv.keys[index, :, start:end] = k
        self.kv.values[index, :, start:end] = v
        attended = attention(q, self.kv.keys[index, :, :end], self.kv.values[index, :, :end],
                             mask, self.scaling)
        x = x + layer.o(attended)
        gate, up = layer.gate_up(rms_norm(x, layer.post_norm, self.eps))
        return x + layer.down(F.silu(gate) * up)

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        rows = self.head(hidden).float()
        if self.vocab is None:
            return rows[:, : self.vocab_size]
        return scatter_logits(rows, self.vocab, self.vocab_size)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Llama's RMSNorm as transformers computes it: normalise in float32, scale in the model dtype."""
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of x [heads, n, head_dim] (cos, sin: [n, head_dim])."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def causal_mask(start: int, n: int, device) -> torch.Tensor:
    """[n, start + n] additive mask: query i (at start + i) sees keys up to start + i."""
    queries = torch.arange(start, start + n, device=device).unsqueeze(1)
    keys = torch.arange(start + n, device=device).unsqueeze(0)
    return torch.zeros((n, start + n), device=device).masked_fill(keys > queries, float("-inf"))


def attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
              mask: torch.Tensor | None, scaling: float) -> torch.Tensor:
    """Grouped-query attention of q [heads, n, d] over keys/values [kv_heads, length, d] -> [n, heads*d].

    Query head h reads key/value head h // group, as transformers' `repeat_kv` does;
    the group's queries are stacked so each key/value head is read once.
    """
    heads, n, d = q.shape
    kv_heads, length = keys.shape[0], keys.shape[1]
    group = heads // kv_heads
    scores = (q.reshape(kv_heads, group * n, d) @ keys.transpose(1, 2)).float() * scaling
    if mask is not None:
        scores = (scores.view(kv_heads, group, n, length) + mask).view(kv_heads, group * n, length)
    weights = scores.softmax(-1).to(values.dtype)
    out = (weights @ values).view(heads, n, d)
    return out.transpose(0, 1).reshape(n, heads * d)
