"""A feature-level draft head (EAGLE's design): one decoder layer that reads the target's own
last hidden state.

Row p of the head reads the target's feature at position p - 1 (its final hidden state after
the last norm: what the target's output matrix multiplies; zeros before the first token) and
the embedding of token p, each under an RMS norm of its own; one linear maps the pair to the
hidden size, one Llama-style decoder layer (grouped-query attention over the head's own rows,
rotary positions, a SwiGLU MLP) transforms it, and a final norm gives the head's guess of the
target's feature at p. The target's output matrix, on the head's reduced output vocabulary,
turns that guess into logits. The embedding and the output matrix are the target's, frozen
and never stored with the head.

`HeadNetwork` holds the head's own weights and the pieces of its forward (`inputs`,
`attention_inputs`, `finish`), which training (specchat.distill.head_train: whole sequences,
causal attention) and drafting (runtime.py: a KV cache, one row at a time) both call, so the
two compute one function. Its linears go through `linear(name, x)`: torch's own modules while
training, the kernels run time puts in `kernels` (int8 rows on a CPU) when drafting. Knows
nothing about files, targets' formats or decoding.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol

import torch
import torch.nn.functional as F

LINEARS = ("fc", "qkv", "o", "gate_up", "down")


class Kernel(Protocol):
    """A callable x -> x W^T (+ bias) that replaces one of the head's linears when drafting
    (the int8 backend's rows, models/int8/linear.py)."""

    @property
    def weight_bytes(self) -> int: ...

    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...

@dataclass(frozen=True)
class HeadShape:
    """The sizes of a head; all but `intermediate` are its target's."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    """The MLP's width (the target's own is wider: a head this size must stay cheap)."""
    eps: float = 1e-6
    rope_base: float = 10000.0
    qkv_bias: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMS norm computed in float32 (in training, x may be bfloat16), in x's dtype."""
    return F.rms_norm(x.float(), (x.shape[-1],), weight.float(), eps).to(x.dtype)


def rope(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """Rotary positions on x [n, heads, head_dim] (the two halves of each head rotate)."""
    half = x.shape[-1] // 2
    inverse = 1.0 / (base ** (torch.arange(0, half, device=x.device, dtype=torch.float32) / half))
    angles = positions.float().unsqueeze(-1) * inverse  # [n, half]
    cos, sin = angles.cos().unsqueeze(1).to(x.dtype), angles.sin().unsqueeze(1).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)


class UnsetLinear(torch.nn.Linear):
    """A linear whose values are left as allocated, for a caller that writes them all
    (torch's `skip_init` would import sympy, 0.17 s, for its meta tensors)."""

    def reset_parameters(self) -> None:
        pass


class HeadNetwork(torch.nn.Module):
    """The head's own weights and its forward's pieces (module docstring)."""

    def __init__(self, shape: HeadShape, initialise: bool = True):
        """`initialise` False leaves the matrices' values unset, for a caller that writes
        every one of them (a head read from its file: 0.19 s less of the default pair's load)."""
        super().__init__()
        self.shape = shape
        hidden, inner = shape.hidden, shape.intermediate
        q_width, kv_width = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim

        def linear(inputs: int, outputs: int, bias: bool = False) -> torch.nn.Linear:
            return (torch.nn.Linear if initialise else UnsetLinear)(inputs, outputs, bias=bias)

        self.feature_norm = torch.nn.Parameter(torch.ones(hidden))
        self.embed_norm = torch.nn.Parameter(torch.ones(hidden))
        self.fc = linear(2 * hidden, hidden)
        self.attn_norm = torch.nn.Parameter(torch.ones(hidden))
        self.qkv = linear(hidden, q_width + 2 * kv_width, bias=shape.qkv_bias)
        self.o = linear(q_width, hidden)
        self.ffn_norm = torch.nn.Parameter(torch.ones(hidden))
        self.gate_up = linear(hidden, 2 * inner)
        self.down = linear(inner, hidden)
        self.out_norm = torch.nn.Parameter(torch.ones(hidden))
        self.kernels: dict[str, Kernel] = {}
        """name -> the kernel that replaces that linear (run time's)."""
        if initialise:
            self.reset_parameters()

    def reset_parameters(self) -> None:
        """Small random matrices; the writes into the residual stream smaller still."""
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for linear in (self.fc, self.qkv, self.o, self.gate_up, self.down):
                linear.weight.copy_(torch.randn(linear.weight.shape, generator=generator) * 0.02)
                if linear.bias is not None:
                    linear.bias.zero_()
            self.o.weight.mul_(0.5)
            self.down.weight.mul_(0.5)

    def linears(self) -> dict[str, torch.nn.Linear]:
        return {name: getattr(self, name) for name in LINEARS}

    def linear(self, name: str, x: torch.Tensor) -> torch.Tensor:
        kernel = self.kernels.get(name)
        return kernel(x) if kernel is not None else getattr(self, name)(x)

    def inputs(self, features: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        """The rows entering the layer: fc(norm(feature at p - 1), norm(embedding of p))."""
        eps = self.shape.eps
        pair = torch.cat([rms_norm(features, self.feature_norm, eps),
                          rms_norm(embeds, self.embed_norm, eps)], dim=-1)
        return self.linear("fc", pair)

    def attention_inputs(self, x: torch.Tensor, positions: torch.Tensor):
        """(q [n, heads, d], k and v [n, kv_heads, d]) of rows x [n, hidden], rope applied."""
        shape, n = self.shape, x.shape[0]
        mixed = self.linear("qkv", rms_norm(x, self.attn_norm, shape.eps))
        q_width, kv_width = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
        q = mixed[:, :q_width].reshape(n, shape.heads, shape.head_dim)
        k = mixed[:, q_width:q_width + kv_width].reshape(n, shape.kv_heads, shape.head_dim)
        v = mixed[:, q_width + kv_width:].reshape(n, shape.kv_heads, shape.head_dim)
        return rope(q, positions, shape.rope_base), rope(k, positions, shape.rope_base), v

    def finish(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """The head's feature guesses: attention output and MLP added to x, then the final norm."""
        eps = self.shape.eps
        x = x + self.linear("o", attended)
        gate, up = self.linear("gate_up", rms_norm(x, self.ffn_norm, eps)).chunk(2, dim=-1)
        x = x + self.linear("down", F.silu(gate) * up)
        return rms_norm(x, self.out_norm, eps)

    @property
    def device(self) -> torch.device:
        """Where the head's parameters are (where it trains)."""
        return self.out_norm.device

    @property
    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())
