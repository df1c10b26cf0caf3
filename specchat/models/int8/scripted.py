"""The int8 forward's per-layer arithmetic as TorchScript: the same operations, dispatched
from TorchScript's interpreter instead of Python, which costs a few microseconds an
operation less (a 135M model's step makes about 1,500 of them: a fifth of its time went to
Python's dispatch, thread time on this project's 2-core machine).

- `flat_linear`: `linear.FlatLinear`'s product (each row scaled on its own, two pinned
  columns, fbgemm's dynamic int8 linear, the row's scale back with the bias or residual);
- `onednn_linear`: the same product on oneDNN's kernel (each row rounded to int8 here,
  unit scales there, the scales back here);
- `tiled_linear`: the Q4_K or Q6_K kernel's product (q4k.py), with the bias or residual;
- `product`: whichever of the two a model's linears were packed for, or the tiled kernels
  (q4k.py) for a linear kept in the file's Q4_K or Q6_K form (its schema is defined here, so these
  functions compile where the kernel is not built; its code comes with q4k.py's library);
- `attend_rows`: rope, the new keys and values into the cache, attention one query row at
  a time (model.py's docstring says why);
- `norm`, `gated`: the RMS norm and the feed-forward's silu(gate) * up;
- `decoder_layer`: one whole layer out of those.

The norms, attention and activation run either as torch's operations or, where rows.py has
loaded rows_kernel.cpp, as its three (`native`): the same arithmetic in fewer calls.

Compiled once, on first use (`compiled`). Knows nothing about files, models or decoding;
the shapes and the reasons are linear.py's and model.py's.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Union

import torch
import torch.nn.functional as F

TILED_SCHEMAS = ("q4k_linear(Tensor x, Tensor tiles, int outputs) -> Tensor",
                 "q6k_linear(Tensor x, Tensor tiles, int outputs) -> Tensor")
"""q4k_kernel.cpp's operations: x [n, in] float32 times a matrix of Q4_K or Q6_K tiles ->
[n, outputs]."""
ROW_SCHEMAS = ("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor",
               "silu_mul(Tensor gate_up) -> Tensor",
               "rope_attend(Tensor qkv, Tensor turns, Tensor(a!) key_rows, "
               "Tensor(b!) value_rows, int start, int heads, int kv_heads, "
               "int head_dim) -> Tensor")
"""rows_kernel.cpp's operations (rows.py): `norm`'s, `gated`'s and `attend_rows`'s
arithmetic, each row computed alone in one fixed order."""


def define_schemas() -> Optional[torch.library.Library]:
    """torch.ops.specchat's schemas, defined once per process (the libraries that q4k.py and
    rows.py load register their CPU code under them)."""
    if hasattr(torch.ops.specchat, "q4k_linear"):
        return None
    library = torch.library.Library("specchat", "FRAGMENT")
    for schema in TILED_SCHEMAS + ROW_SCHEMAS:
        library.define(schema)
    return library


_LIBRARY = define_schemas()
"""Kept alive: a `Library` removes its definitions when it is collected."""


def flat_linear(x: torch.Tensor, buffer: torch.Tensor, view: torch.Tensor,
                packed: (  # TorchScript's class for packed weights, which mypy cannot see
                    torch.classes.quantized.LinearPackedParamsBase),  # type: ignore[name-defined]
                base: Optional[torch.Tensor], reduce_range: bool) -> torch.Tensor:
    """x [n, in] -> x W^T (+ base): x / its rows' magnitudes into `view` (the input columns
    of `buffer`, whose last two columns hold +1 and -1), the int8 product, the magnitudes back."""
    magnitude = row_magnitudes(x)
    torch.div(x, magnitude, out=view)
    return scaled_back(torch.ops.quantized.linear_dynamic(buffer, packed, reduce_range),
                       magnitude, base)


def row_magnitudes(x: torch.Tensor) -> torch.Tensor:
    """[n, 1]: each row's largest magnitude, at least float32's smallest normal number (an
    all-zero row divides to zeros, not NaN)."""
    return x.abs().amax(1, keepdim=True).clamp_min_(1.1754943508222875e-38)


def scaled_back(y: torch.Tensor, magnitude: torch.Tensor,
                base: Optional[torch.Tensor]) -> torch.Tensor:
    """A product of rows divided by their magnitudes, times them again (+ base)."""
    if base is None:
        return y * magnitude
    return torch.addcmul(base, y, magnitude)


ONEDNN_RANGE = 127.0
"""A row scaled for oneDNN lies in [-127, 127] before rounding: 8 bits, symmetric."""


def onednn_linear(x: torch.Tensor, packed: torch.Tensor, columns: torch.Tensor,
                  unit: torch.Tensor, zero: torch.Tensor,
                  base: Optional[torch.Tensor]) -> torch.Tensor:
    """x [n, in] -> x W^T (+ base) on oneDNN: each row over its magnitude times 127, rounded
    to int8; oneDNN's int32 sums with unit scales (`unit` 1.0, `zero` 0), as float; then
    each column's scale (`columns`) and each row's magnitude back."""
    magnitude = row_magnitudes(x)
    # ONEDNN_RANGE, written out: TorchScript reads no global float
    rows = torch.div(x, magnitude).mul_(127.0).round_().to(torch.int8)
    no_post_op: List[Optional[Union[int, float, complex]]] = []  # TorchScript's Scalar?[]
    sums = torch.ops.onednn.qlinear_pointwise(rows, 1.0, 0, packed, unit, zero, None, 1.0, 0,
                                              torch.float32, "none", no_post_op, "")
    return scaled_back(sums.mul_(columns), magnitude, base)


def tiled_linear(x: torch.Tensor, tiles: torch.Tensor, outputs: int, bits: int,
                 base: Optional[torch.Tensor]) -> torch.Tensor:
    """x [n, in] -> x W^T (+ base) on the kernel for W's tiles `tiles` (q4k.py): Q6_K's where
    `bits` is 6, Q4_K's where it is 4."""
    if bits == 6:
        y = torch.ops.specchat.q6k_linear(x, tiles, outputs)
    else:
        y = torch.ops.specchat.q4k_linear(x, tiles, outputs)
    return y if base is None else y + base


def product(x: torch.Tensor, index: int, base: Optional[torch.Tensor],
            packed: List[  # TorchScript's class for packed weights (see flat_linear)
                torch.classes.quantized.LinearPackedParamsBase],  # type: ignore[name-defined]
            onednn: List[List[torch.Tensor]], tiles: List[torch.Tensor], bits: List[int],
            outputs: List[int], inputs: List[int], pins: torch.Tensor,
            reduce_range: bool) -> torch.Tensor:
    """A layer's linear `index` on the kernel its weights were packed for: the Q4_K or Q6_K
    kernel's where `tiles` holds its tiles (an empty tensor where it does not; `bits` 4 or
    6, `outputs` its rows), oneDNN's where `onednn` holds them ([packed, columns, unit,
    zero] each), else fbgemm's (`packed`)."""
    if tiles[index].numel() > 0:
        return tiled_linear(x, tiles[index], outputs[index], bits[index], base)
    if len(onednn) > 0:
        weight = onednn[index]
        return onednn_linear(x, weight[0], weight[1], weight[2], weight[3], base)
    buffer = pinned(x, inputs[index], pins)
    return flat_linear(x, buffer[0], buffer[1], packed[index], base, reduce_range)


def pinned(x: torch.Tensor, inputs: int, pins: torch.Tensor) -> List[torch.Tensor]:
    """[a buffer of x's rows' width and the `pins` columns (+1 and -1), its view of the rest]."""
    buffer = torch.empty(x.size(0), inputs + pins.size(0))
    buffer[:, inputs:] = pins
    return [buffer, buffer[:, :inputs]]


def attend_rows(qkv: torch.Tensor, turns: torch.Tensor, key_rows: torch.Tensor,
                value_rows: torch.Tensor, key_heads: torch.Tensor, value_heads: torch.Tensor,
                start: int, heads: int, kv_heads: int, head_dim: int,
                native: bool = False) -> torch.Tensor:
    """One layer's attention from its q/k/v rows [n, (heads + 2 kv_heads) * d] at positions
    start.. -> [n, heads * d]: rope on q and k (adjacent pairs as complex numbers), the new
    keys and values written into the cache rows [capacity, kv_heads, d], then each query row
    attending over the cache's heads [1, kv_heads, capacity, d] up to its own position, one
    row at a time: one call of torch's flash attention for the CPU over [1, kv_heads, group,
    d] queries (the query heads that share a key head), the call a single step makes.
    `native`: all of it in one call of rows_kernel.cpp's `rope_attend` instead."""
    if native:
        return torch.ops.specchat.rope_attend(qkv, torch.view_as_real(turns), key_rows,
                                              value_rows, start, heads, kv_heads, head_dim)
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


def norm(x: torch.Tensor, weight: torch.Tensor, eps: float, native: bool) -> torch.Tensor:
    """x's rows' RMS norm times `weight`: torch's, or rows_kernel.cpp's where `native`."""
    if native:
        return torch.ops.specchat.rms_norm(x, weight, eps)
    return F.rms_norm(x, [x.size(1)], weight, eps)


def gated(gate_up: torch.Tensor, native: bool) -> torch.Tensor:
    """[n, 2m] -> silu(the first half) * the second half [n, m]: torch's, or
    rows_kernel.cpp's where `native`."""
    if native:
        return torch.ops.specchat.silu_mul(gate_up)
    half = gate_up.size(1) // 2
    return F.silu(gate_up[:, :half]).mul_(gate_up[:, half:])


def decoder_layer(x: torch.Tensor, norms: List[torch.Tensor], eps: float,
                  packed: List[  # TorchScript's class for packed weights (see flat_linear)
                    torch.classes.quantized.LinearPackedParamsBase],  # type: ignore[name-defined]
                  onednn: List[List[torch.Tensor]], tiles: List[torch.Tensor], bits: List[int],
                  outputs: List[int],
                  inputs: List[int], qkv_bias: Optional[torch.Tensor], pins: torch.Tensor,
                  reduce_range: bool,
                  turns: torch.Tensor, cache: List[torch.Tensor], start: int, heads: int,
                  kv_heads: int, head_dim: int, native: bool) -> torch.Tensor:
    """One decoder layer: `norms` [attention, feed-forward], the qkv, o, gate_up and down
    linears packed for fbgemm (`packed`, `inputs` their widths, `pins` their pinned columns'
    values) or for oneDNN (`onednn`), or kept as Q4_K or Q6_K tiles (`tiles`, `bits`,
    `outputs`; see `product`), `cache` [key rows, value rows, key heads, value heads];
    `native`: the norms, attention and activation on rows_kernel.cpp's operations."""
    h = norm(x, norms[0], eps, native)
    qkv = product(h, 0, qkv_bias, packed, onednn, tiles, bits, outputs, inputs, pins, reduce_range)
    attended = attend_rows(qkv, turns, cache[0], cache[1], cache[2], cache[3], start, heads,
                           kv_heads, head_dim, native)
    x = product(attended, 1, x, packed, onednn, tiles, bits, outputs, inputs, pins, reduce_range)
    h = norm(x, norms[1], eps, native)
    gate_up = product(h, 2, None, packed, onednn, tiles, bits, outputs, inputs, pins, reduce_range)
    return product(gated(gate_up, native), 3, x, packed, onednn, tiles, bits, outputs, inputs,
                   pins, reduce_range)


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
