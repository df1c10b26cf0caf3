"""Choosing a device and a dtype, with the reason shown to the user.

`auto` dtype is bfloat16 where the hardware computes it natively (CUDA with bf16
support, or a CPU with AVX-512 BF16 / AMX), else float16 on older GPUs and
float32 on CPUs.
"""

from __future__ import annotations

from pathlib import Path

import torch

from specchat.errors import PairError

DTYPE_NAMES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def resolve_device(requested: str) -> tuple[str, str]:
    """(device, why) for auto|cpu|cuda|cuda:N."""
    if requested == "auto":
        if torch.cuda.is_available():
            return "cuda", f"auto: CUDA device {torch.cuda.get_device_name(0)}"
        return "cpu", "auto: no CUDA device"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise PairError(f"device '{requested}' asked for, but no CUDA GPU is visible: "
                        "use device = \"cpu\" or \"auto\"")
    return requested, "as configured"


def resolve_dtype(requested: str, device: str) -> tuple[torch.dtype, str]:
    """(dtype, why) for auto|float32|bfloat16|float16 on this device."""
    if requested != "auto":
        return DTYPE_NAMES[requested], "as configured"
    if device.startswith("cuda"):
        if torch.cuda.is_bf16_supported():
            return torch.bfloat16, "auto: the GPU supports bfloat16"
        return torch.float16, "auto: the GPU lacks bfloat16, using float16"
    flags = cpu_flags()
    if flags & {"avx512_bf16", "amx_bf16"}:
        return torch.bfloat16, "auto: the CPU has native bfloat16 (AVX-512 BF16/AMX)"
    return torch.float32, "auto: the CPU has no native bfloat16"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
