"""Run a specchat command as it runs on a CPU with AVX2 and FMA but no AVX-512: a model of
such a CPU on one that has AVX-512, for measuring what specchat does there.

- specchat sees this CPU's flags less every AVX-512, AVX-VNNI and AMX one, so it chooses as
  it would there: the Q4_K kernel's AVX2 path for a large target, fbgemm's 7-bit
  activations for the rest;
- its own C++ operations (native.py) compile for AVX2 alone (-march=haswell), into their
  own cache folders;
- torch's kernels and fbgemm's are held to AVX2 (ATEN_CPU_CAPABILITY=avx2,
  FBGEMM_ENABLE_INSTRUCTIONS=AVX2, set before torch loads).

What it cannot model: the other CPU's clock, caches and memory. llama.cpp's programs for a
comparison are built for AVX2 alone apart and given with --llama-bin.

    python scripts/as_avx2.py bench run --pair qwen2.5-coder-head --llama-bin DIR --json
"""

from __future__ import annotations

import os
import sys

WIDE = ("avx512", "avx_vnni", "amx")
"""Flags that start with these are the ones an AVX2-only CPU lacks."""
HELD_TO_AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"}


def avx2_flags(flags: set[str]) -> set[str]:
    """`flags` as an AVX2-only CPU would show them."""
    return {flag for flag in flags if not flag.startswith(WIDE)}


def hold_to_avx2() -> None:
    """Everything specchat and torch choose from here on, as on an AVX2-only CPU."""
    os.environ.update(HELD_TO_AVX2)
    import specchat.models.device.hardware as hardware
    import specchat.models.int8.native as native

    real = hardware.cpu_flags
    hardware.cpu_flags = lambda: avx2_flags(real())  # type: ignore[assignment]
    native.TARGET = "haswell"
    print("as on an AVX2-only CPU: flags without " + ", ".join(f"{w}*" for w in WIDE)
          + ", -march=haswell, " + ", ".join(f"{k}={v}" for k, v in HELD_TO_AVX2.items()),
          file=sys.stderr)


if __name__ == "__main__":
    hold_to_avx2()
    from specchat.cli import main

    main(args=sys.argv[1:], prog_name="specchat")
