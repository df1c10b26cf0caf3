"""The int8 forward's norms, attention and activation in one C++ call each
(rows_kernel.cpp), where torch's operations take several and attention one call a row.

A step of the 1.5B target spent about 8.5 ms of its 48 outside its matrices on an AMD EPYC
(Zen 4), a verify of 8 rows 14.8 of 74 (results/cpu-2026-11-28-q4k/parts.txt): torch's
per-row flash attention call alone costs 83 microseconds a layer, its RMS norm 38
(results/cpu-2026-11-28-rows/overheads.txt). rows_kernel.cpp does the same arithmetic with each row computed alone, in one
fixed order, so a verify row still equals its single step bit for bit.

- `rows_library`: rows_kernel.cpp compiled once per machine, torch and source into the
  cache, and loaded (native.py);
- `why_not_here`: why the operations cannot be used here (no compiler, a failed build, a
  result that fails the check), or None;
- `native_rows`: whether a model should use them, saying why not in one line.

Knows nothing about files, models or decoding.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable

import torch

import specchat.models.int8.native as native

SOURCE = Path(__file__).with_name("rows_kernel.cpp")
OPERATIONS = "the row operations"
"""What the load's lines call them."""


def library_folder() -> Path:
    return native.library_folder(SOURCE, "rows")


def rows_library() -> Path:
    """The compiled operations, built on first use and loaded into torch
    (`native.KernelUnavailable` where they cannot be)."""
    return native.loaded_library(SOURCE, "rows", OPERATIONS, library_folder())


def native_rows(progress: Callable[[str], None] = lambda _: None) -> bool:
    """Whether the row operations build, load and pass the check here (asked once a process).
    `progress` hears that they compile, the first time on this machine, and why they
    cannot run (torch's operations then do the same work)."""
    return native.usable(library_folder(), OPERATIONS, why_not_here, "torch's instead", progress)


@functools.lru_cache(maxsize=1)
def why_not_here() -> str | None:
    """Why the operations cannot be used here, or None where they build, load, agree with
    torch's on a small example and give each row the same bits alone as in a batch."""
    try:
        rows_library()
        agree, alone = check_example()
    except Exception as error:  # noqa: BLE001 - any failure means "not here", and says why
        from specchat.errors import one_line

        return one_line(error, 160)
    if not agree:
        return "their results failed the check against torch's"
    if not alone:
        return "a row's result depended on the rows beside it"
    return None


def check_example(heads: int = 4, kv_heads: int = 2, head_dim: int = 32,
                  depth: int = 40, rows: int = 5) -> tuple[bool, bool]:
    """(the three operations agree with torch's within float32's rounding, the last `rows`
    rows computed in one call equal the same rows one call each), on random rows at
    `depth` positions."""
    import specchat.models.int8.scripted as scripted

    generator = torch.Generator().manual_seed(0)
    width, total = (heads + 2 * kv_heads) * head_dim, depth + rows
    qkv = torch.randn(total, width, generator=generator)
    turns = torch.polar(torch.ones(total, 1, head_dim // 2),
                        torch.rand(total, 1, head_dim // 2, generator=generator) * 6.3)

    def attended(native: bool, chunks: list[int]) -> torch.Tensor:
        keys, values = torch.zeros(total, kv_heads, head_dim), torch.zeros(total, kv_heads, head_dim)
        heads_view = [keys.permute(1, 0, 2).unsqueeze(0), values.permute(1, 0, 2).unsqueeze(0)]
        out, start = [], 0
        for n in chunks:
            out.append(scripted.attend_rows(qkv[start:start + n], turns[start:start + n], keys,
                                            values, heads_view[0], heads_view[1], start, heads,
                                            kv_heads, head_dim, native))
            start += n
        return torch.cat(out)

    batched = attended(True, [depth, rows])
    alone = attended(True, [depth] + [1] * rows)
    x = torch.randn(rows, width, generator=generator) * 4
    weight = torch.randn(width, generator=generator)
    agree = (torch.allclose(batched, attended(False, [depth, rows]), rtol=1e-4, atol=1e-5)
             and torch.allclose(scripted.norm(x, weight, 1e-6, True),
                                scripted.norm(x, weight, 1e-6, False), rtol=1e-5, atol=1e-5)
             and torch.allclose(scripted.gated(x, True), scripted.gated(x, False),
                                rtol=1e-5, atol=1e-5))
    same = (torch.equal(batched, alone)
            and torch.equal(scripted.norm(x, weight, 1e-6, True)[2:3],
                            scripted.norm(x[2:3].clone(), weight, 1e-6, True)))
    return agree, same
