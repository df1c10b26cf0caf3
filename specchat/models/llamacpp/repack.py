"""Whether llama.cpp may repack a GGUF model's weights on this CPU, and why not.

At load llama.cpp copies a model's weights into "extra buffer types" laid out for its
fastest kernels: AMX tiles on a CPU with AMX (Intel Sapphire Rapids and later),
interleaved rows elsewhere. Its AMX matrix multiply crashes the process (SIGSEGV in
`ggml_backend_amx_mul_mat`, llama.cpp issue #20824: machine-dependent, Q4_K_M files among
those hit). On this project's Sapphire Rapids machine (2026-11-27) every forward of more
than one token crashed, in llama-cpp-python 0.3.36 and in the llama-bench built from the
same sources, for the Qwen2.5-Coder Q4_K_M and the SmolLM2 Q4_1 files alike; one-token
steps ran. So on a CPU with AMX every llama.cpp load specchat makes turns repacking off
(the model parameter `use_extra_bufts`; llama-bench's `--repack 0`, the other programs'
`--no-repack`): there llama-bench's plain decoding of the Qwen 1.5B Q4_K_M ran 12.0 and
12.5 tok/s without repacking against 12.8 and 14.0 with it (alternated; one-token steps
do not crash), about 9% slower: the price of not crashing
(results/cpu-2026-11-27-spr/llama-bench-repack.txt).

Knows nothing but the CPU's flags.
"""

from __future__ import annotations

AMX_FLAGS = frozenset({"amx_tile", "amx_int8", "amx_bf16"})

NOT_REPACKED = "weights not repacked: llama.cpp's AMX kernels crash on this CPU (llama.cpp#20824)"
"""What a label says where repacking is off."""


def repack_allowed(flags: set[str] | None = None) -> bool:
    """Whether llama.cpp may repack weights here: not on a CPU with AMX (module docstring).
    `flags`: the CPU's flags (read from /proc/cpuinfo where not given)."""
    if flags is None:
        from specchat.models.device.hardware import cpu_flags

        flags = cpu_flags()
    return not flags & AMX_FLAGS
