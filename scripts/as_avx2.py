"""Run a specchat command as it runs on a CPU with AVX2 and FMA but no AVX-512: a model of
such a CPU on one that has AVX-512, for measuring what specchat does there.

- specchat sees this CPU's flags less every AVX-512, AVX-VNNI and AMX one, so it chooses as
  it would there: the Q4_K kernel's AVX2 path for a large target, fbgemm's 7-bit
  activations for the rest;
- its own C++ operations (native.py) compile for AVX2 alone (-march=haswell), into their
  own cache folders;
- torch's kernels and fbgemm's are held to AVX2 (ATEN_CPU_CAPABILITY=avx2,
  FBGEMM_ENABLE_INSTRUCTIONS=AVX2, set before torch loads).

With --avx-vnni first, a CPU that also has AVX-VNNI (Intel's cores since Alder Lake): its
flags keep avx_vnni, the C++ compiles for -march=alderlake (the Q4_K kernel's AVX-VNNI
path), torch and fbgemm stay at AVX2 (fbgemm has no AVX-VNNI kernels). It needs a CPU with
AVX-VNNI to run on.

What it cannot model: the other CPU's clock, caches and memory. llama.cpp's programs for a
comparison are built for AVX2 alone apart and given with --llama-bin.

    python scripts/as_avx2.py [--avx-vnni] bench run --pair qwen2.5-coder-head --llama-bin DIR --json
"""

from __future__ import annotations

import os
import sys

WIDE = ("avx512", "avx_vnni", "amx")
"""Flags that start with these are the ones an AVX2-only CPU lacks."""
HELD_TO_AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"}
AVX_VNNI = "avx_vnni"
TARGETS = {False: "haswell", True: "alderlake"}
"""-march for the model without and with AVX-VNNI (neither has AVX-512)."""


def avx2_flags(flags: set[str], avx_vnni: bool = False) -> set[str]:
    """`flags` as an AVX2-only CPU (with AVX-VNNI: as an Alder Lake) would show them."""
    return {flag for flag in flags
            if not flag.startswith(WIDE) or (avx_vnni and flag.startswith(AVX_VNNI))}


def hold_to_avx2(avx_vnni: bool = False) -> None:
    """Everything specchat and torch choose from here on, as on an AVX2-only CPU (or one
    with AVX-VNNI too); SystemExit with one line where this CPU cannot run that model."""
    os.environ.update(HELD_TO_AVX2)
    import specchat.models.device.hardware as hardware
    import specchat.models.int8.native as native

    real = hardware.cpu_flags
    if avx_vnni and AVX_VNNI not in real():
        raise SystemExit("as_avx2.py --avx-vnni: this CPU has no AVX-VNNI to run that model's "
                         "code on; run it without --avx-vnni")
    hardware.cpu_flags = lambda: avx2_flags(real(), avx_vnni)  # type: ignore[assignment]
    native.TARGET = TARGETS[avx_vnni]
    kept = ", avx_vnni kept" if avx_vnni else ""
    print(f"as on an AVX2-only CPU{kept}: flags without "
          + ", ".join(f"{w}*" for w in WIDE if not (avx_vnni and w == AVX_VNNI))
          + f", -march={native.TARGET}, "
          + ", ".join(f"{k}={v}" for k, v in HELD_TO_AVX2.items()), file=sys.stderr)


if __name__ == "__main__":
    with_avx_vnni = sys.argv[1:2] == ["--avx-vnni"]
    hold_to_avx2(with_avx_vnni)
    from specchat.cli import main

    main(args=sys.argv[1 + with_avx_vnni:], prog_name="specchat")
