"""Per-row int8 weights: one float scale (absmax / 127) per output row.

The one quantisation scheme specchat uses for weights: to ship a trained draft small
(`distill.draft.quantize_int8`), to multiply a draft by int8 weights on a CPU
(`lean.Projection`), and for every matrix of the int8 backend (models/int8/). Knows nothing
about files or models.
"""

from __future__ import annotations

import torch


def quantize_rows(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 rows, float32 scale per row) with rows * scale ≈ matrix."""
    values = matrix.float()
    scale = values.abs().amax(dim=1).clamp_min(1e-12) / 127
    rows = (values / scale[:, None]).round().clamp(-127, 127).to(torch.int8)
    return rows, scale
