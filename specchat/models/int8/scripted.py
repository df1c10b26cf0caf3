"""The int8 forward's per-layer arithmetic as TorchScript: the same operations, dispatched
from TorchScript's interpreter instead of Python, which costs a few microseconds an
operation less (a 135M model's step makes about 1,500 of them: a fifth of its time went to
Python's dispatch, thread time on this project's 2-core machine).

- `flat_linear`: `linear.FlatLinear`'s product (each row scaled on its own, two pinned
  columns, fbgemm's dynamic int8 linear, the row's scale back with the bias or residual);
- `attend_rows`: rope, the new keys and values into the cache, attention one query row at
  a time (model.py's docstring says why);
- `decoder_layer`: one whole layer out of those.

Compiled once, on first use (`compiled`). Knows nothing about files, models or decoding;
the shapes and the reasons are linear.py's and model.py's.
"""

from __future__ import annotations

from typing import Callable, List, Optional

import torch
import torch.nn.functional as F



def flat_linear(x: torch.Tensor, buffer: torch.Tensor, view: torch.Tensor,
                packed: (  # TorchScript's class for packed weights, which mypy cannot see
                    torch.classes.quantized.LinearPackedParamsBase),  # type: ignore[name-defined]
                base: Optional[torch.Tensor], reduce_range: bool) -> torch.Tensor:
    """x [n, in] -> x W^T (+ base): x / its rows' magnitudes into `view` (the input columns
    of `buffer`, whose last two columns hold +1 and -1), the int8 product, the magnitudes back."""
    # at least float32's smallest normal number: an all-zero row divides to zeros, not NaN
    magnitude = x.abs().amax(1, keepdim=True).clamp_min_(1.1754943508222875e-38)
    torch.div(x, magnitude, out=view)
    y = torch.ops.quantized.linear_dynamic(buffer, packed, reduce_range)
    if base is None:
        return y * magnitude
    return torch.addcmul(base, y, magnitude)


def pinned(x: torch.Tensor, inputs: int, pins: torch.Tensor) -> List[torch.Tensor]:
    """[a buffer of x's rows' width and the `pins` columns (+1 and -1), its view of the rest]."""
    buffer = torch.empty(x.size(0), inputs + pins.size(0))
    buffer[:, inputs:] = pins
    return [buffer, buffer[:, :inputs]]


def attend_rows(qkv: torch.Tensor, turns: torch.Tensor, key_rows: torch.Tensor,
                value_rows: torch.Tensor, key_heads: torch.Tensor, value_heads: torch.Tensor,
                start: int, heads: int, kv_heads: int, head_dim: int) -> torch.Tensor:
    """One layer's attention from its q/k/v rows [n, (heads + 2 kv_heads) * d] at positions
    start.. -> [n, heads * d]: rope on q and k (adjacent pairs as complex numbers), the new
    keys and values written into the cache rows [capacity, kv_heads, d], then each query row
    attending over the cache's heads [1, kv_heads, capacity, d] up to its own position, one
    row at a time: one call of torch's flash attention for the CPU over [1, kv_heads, group,
    d] queries (the query heads that share a key head), the call a single step makes."""
    n = qkv.size(0)
    rotating = heads + kv_heads
    pairs = qkv[:, : rotating * head_dim].reshape(n, rotating, head_dim // 2, 2)
    rotated = torch.view_as_real(torch.view_as_complex(pairs) * turns).view(n, rotating, head_dim)
    key_rows[start:start + n] = rotated[:, heads:]
    value_rows[start:start + n] = qkv[:, rotating * head_dim:].view(n, kv_heads, head_dim)
    grouped = rotated[:, :heads].view(n, 1, kv_heads, heads // kv_heads, head_dim)
    rows: List[torch.Tensor] = []
    for r in range(n):
        end = start + r + 1
        rows.append(F.scaled_dot_product_attention(grouped[r], key_heads[:, :, :end],
                                                   value_heads[:, :, :end]))
    return torch.cat(rows).view(n, heads * head_dim)


def decoder_layer(x: torch.Tensor, norms: List[torch.Tensor], eps: float,
                  packed: List[  # TorchScript's class for packed weights (see flat_linear)
                    torch.classes.quantized.LinearPackedParamsBase],  # type: ignore[name-defined]
                  inputs: List[int], qkv_bias: Optional[torch.Tensor], pins: torch.Tensor,
                  reduce_range: bool, turns: torch.Tensor, cache: List[torch.Tensor],
                  start: int, heads: int, kv_heads: int, head_dim: int) -> torch.Tensor:
    """One decoder layer: `norms` [attention, feed-forward], `packed`/`inputs` the qkv, o,
    gate_up and down linears, `pins` their pinned columns' values, `cache` [key rows,
    value rows, key heads, value heads]."""
    hidden = x.size(1)
    h = F.rms_norm(x, [hidden], norms[0], eps)
    buffer = pinned(h, inputs[0], pins)
    qkv = flat_linear(h, buffer[0], buffer[1], packed[0], qkv_bias, reduce_range)
    attended = attend_rows(qkv, turns, cache[0], cache[1], cache[2], cache[3], start, heads,
                           kv_heads, head_dim)
    buffer = pinned(attended, inputs[1], pins)
    x = flat_linear(attended, buffer[0], buffer[1], packed[1], x, reduce_range)
    h = F.rms_norm(x, [hidden], norms[1], eps)
    buffer = pinned(h, inputs[2], pins)
    gate_up = flat_linear(h, buffer[0], buffer[1], packed[2], None, reduce_range)
    half = gate_up.size(1) // 2
    act = F.silu(gate_up[:, :half]).mul_(gate_up[:, half:])
    buffer = pinned(act, inputs[3], pins)
    return flat_linear(act, buffer[0], buffer[1], packed[3], x, reduce_range)


_COMPILED: dict[str, Callable] = {}
SCRIPTED = True
"""False runs these functions as plain Python (the same arithmetic, slower): what the tests
compare the compiled forward with, and where they swap `flat_linear` for a float product."""


def compiled(name: str) -> Callable:
    """This module's function `name`, compiled by TorchScript on first use."""
    if not SCRIPTED:
        return globals()[name]
    if name not in _COMPILED:
        import warnings

        with warnings.catch_warnings():  # torch marks TorchScript deprecated; it still runs
            warnings.simplefilter("ignore")
            _COMPILED[name] = torch.jit.script(globals()[name])
    return _COMPILED[name]
