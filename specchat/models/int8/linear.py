"""One linear layer on int8 weights whose result for a row never depends on the other rows.

fbgemm's dynamic int8 linear (through torch's quantized ops) streams int8 weights at the
machine's memory rate and keeps that rate for a few rows at once: a verify of 8 tokens
costs little more than one step. Left alone it is not exact for a verify: it picks one
activation scale for the whole batch from its minimum and maximum, so a row's result
depends on which rows came with it. `FlatLinear` removes that dependence by construction:

- each row is divided by its own largest magnitude, so every value lies in [-1, 1];
- two extra input columns hold exactly +1 and -1 (their weights are zero), so every batch,
  of any size, has minimum -1 and maximum +1, and fbgemm always picks the same scale;
- the int32 accumulation is exact, and the float epilogue is the same per element;
- the row's scale multiplies the result back (and adds the bias or the residual in the
  same operation).

Rows are quantized to 8 bits where the CPU has VNNI (int32 dot products without
saturation), to 7 bits elsewhere (AVX2's 16-bit pair sums would saturate on 8): the
`reduce_range` fbgemm documents. Weights are int8 with one scale per output row
(`torch_backend.int8.quantize_rows`).

fbgemm reuses a weight tile for a few rows only: on a CPU with AMX its verify of 8 rows
costs 1.7 steps. oneDNN's int8 matmul (the `ONEDNN` kernel; AMX tiles where the CPU has
them) stays flat to 16 rows there, for a single step about 8% slower. It is exact for a
verify by a simpler construction: each row is scaled to [-127, 127] and rounded to int8 by
this module itself, oneDNN multiplies with unit scales, so it returns the int32 sums turned
to float (an exact integer product whatever its blocking, then one rounding), and the
scales come back here, element by element. Knows nothing about models, files or decoding.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import torch

from specchat.models.blocks.int8_rows import quantize_rows
from specchat.models.int8.scripted import ONEDNN_RANGE, compiled

PIN_VALUES = (1.0, -1.0)
"""Extra input columns' values (their weights are zero): the batch's fixed range."""
PINS = len(PIN_VALUES)
FBGEMM, ONEDNN, Q4K = "fbgemm", "onednn", "q4k"
"""The kernels a `FlatLinear` multiplies with (module docstring), and Q4K: a model whose
Q4_K matrices stay Q4_K (q4k.py) and whose other matrices are on fbgemm."""


def rows_kernel(kernel: str) -> str:
    """The kernel a model's int8 rows multiply with: fbgemm's beside the tiled kernels (Q4K),
    else `kernel` itself."""
    return FBGEMM if kernel == Q4K else kernel


def flat_bytes(outputs: int, inputs: int, kernel: str) -> int:
    """Bytes a `FlatLinear` of [outputs, inputs] holds on `kernel`: oneDNN's int8 rows and a
    float32 scale each; fbgemm's packed rows with their pin columns and their scales."""
    if kernel == ONEDNN:
        return outputs * inputs + 4 * outputs
    return outputs * (inputs + PINS) + 8 * outputs


KEPT_BUFFERS = 32
"""Input buffers are kept for batches up to this many rows (steps and verifies); a longer
prompt's chunk gets a fresh one."""


def quantized_weight(rows: torch.Tensor, scale: torch.Tensor):
    """fbgemm's packed form of int8 rows [out, in] with per-row scales, two zero columns added."""
    padded = torch.cat([rows, rows.new_zeros(rows.shape[0], PINS)], 1)
    zeros = torch.zeros(rows.shape[0], dtype=torch.long)
    with warnings.catch_warnings():  # torch 2.13 deprecates quantized tensors (issue 184982)
        warnings.simplefilter("ignore")
        weight = torch._make_per_channel_quantized_tensor(padded, scale.double(), zeros, 0)
        return torch.ops.quantized.linear_prepack(weight, None)


@dataclass(frozen=True)
class OnednnWeight:
    """oneDNN's packed form of int8 rows, and what turns its int32 sums back into the product:
    `columns` [out], each row's scale over 127 (the activations' int8 range)."""

    packed: torch.Tensor
    columns: torch.Tensor

    @classmethod
    def of(cls, rows: torch.Tensor, scale: torch.Tensor) -> "OnednnWeight":
        return cls(torch.ops.onednn.qlinear_prepack(rows.contiguous(), None),
                   (scale.float() / ONEDNN_RANGE).contiguous())

    def arguments(self) -> list[torch.Tensor]:
        """What scripted.onednn_linear takes after the input: [packed, columns, unit, zero]."""
        return [self.packed, self.columns, UNIT_SCALE, NO_ZERO_POINT]


UNIT_SCALE = torch.ones(1)
NO_ZERO_POINT = torch.zeros(1, dtype=torch.long)
"""oneDNN's weight scale and zero point: its product stays the int32 sums, as float."""


class FlatLinear:
    """x -> x W^T (+ bias), or + a residual, on int8 weights, batch-invariant (module docstring)."""

    def __init__(self, rows: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None,
                 reduce_range: bool = False, kernel: str = FBGEMM):
        self.onednn = OnednnWeight.of(rows, scale) if kernel == ONEDNN else None
        self.packed = quantized_weight(rows, scale) if self.onednn is None else None
        self.inputs, self.outputs = int(rows.shape[1]), int(rows.shape[0])
        self.bias = None if bias is None else bias.float().contiguous()
        self.reduce_range = reduce_range
        self._buffers: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        """Per batch size: the pinned input buffer and its view of the input columns."""

    @classmethod
    def of(cls, weight: torch.Tensor, bias: torch.Tensor | None = None,
           reduce_range: bool = False, kernel: str = FBGEMM) -> "FlatLinear":
        """From a float weight [out, in], quantized per row."""
        rows, scale = quantize_rows(weight)
        return cls(rows, scale, bias, reduce_range, kernel)

    @property
    def weight_bytes(self) -> int:
        """Bytes of the packed int8 weights and their scales."""
        return flat_bytes(self.outputs, self.inputs, FBGEMM if self.onednn is None else ONEDNN)

    def __call__(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        """x [n, in] float32 -> [n, out] float32; `residual` [n, out] is added when given
        (the arithmetic: scripted.flat_linear)."""
        base = residual if self.bias is None else (self.bias if residual is None
                                                   else residual + self.bias)
        if self.onednn is not None:
            return compiled("onednn_linear")(x, *self.onednn.arguments(), base)
        n = int(x.shape[0])
        kept = self._buffers.get(n)
        if kept is None:
            buffer = pinned_buffer(n, self.inputs)
            kept = (buffer, buffer[:, : self.inputs])
            if n <= KEPT_BUFFERS:
                self._buffers[n] = kept
        return compiled("flat_linear")(x, kept[0], kept[1], self.packed, base, self.reduce_range)


@functools.lru_cache(maxsize=1)
def onednn_multiplies() -> bool:
    """Whether oneDNN's int8 product runs in this torch on this CPU and computes a small
    product right (checked once: a build without it, or a kernel that fails, leaves a
    target on fbgemm instead of failing its load)."""
    generator = torch.Generator().manual_seed(0)
    rows = torch.randint(-127, 128, (24, 40), dtype=torch.int8, generator=generator)
    x = torch.randint(-127, 128, (3, 40), generator=generator).float()
    x[:, 0] = 127.0  # each row's magnitude: its own scale then leaves it as it is
    try:
        y = FlatLinear(rows, torch.ones(24), kernel=ONEDNN)(x)
    except Exception:  # noqa: BLE001 - any failure means "not here"
        return False
    return bool(torch.allclose(y, x @ rows.float().T, rtol=1e-5, atol=1e-2))


@functools.lru_cache(maxsize=1)
def placeholder_packed():
    """A 1 x 1 fbgemm weight standing in a layer's list of packed weights for a linear that
    multiplies on another kernel (scripted.product never reads it)."""
    return quantized_weight(torch.zeros(1, 1, dtype=torch.int8), torch.ones(1))


def pinned_buffer(rows: int, inputs: int) -> torch.Tensor:
    """[rows, inputs + 2] whose last two columns are +1 and -1 (the rest is overwritten)."""
    buffer = torch.zeros(rows, inputs + PINS)
    buffer[:, inputs:] = torch.tensor(PIN_VALUES)
    return buffer
