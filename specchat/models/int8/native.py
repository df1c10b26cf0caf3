"""The int8 backend's own C++ operations: compiled once per machine, source and torch into
the cache (a few seconds, with the C++ compiler that built llama-cpp-python), then loaded
into torch, which registers them under `torch.ops.specchat` (their schemas are
scripted.py's).

- `compile_command`: the compiler call for one source file against this torch;
- `library_folder`: where a source's library lives, keyed by the source, the flags, torch
  and the CPU's flags;
- `loaded_library`: built on first use, then loaded (`KernelUnavailable` where it cannot be);
- `usable`: whether a library runs here, saying that it compiles and why not in one line.

Two sources use it: q4k_kernel.cpp (the Q4_K and Q6_K products, q4k.py) and
rows_kernel.cpp (norms, attention and the activation, rows.py). Knows nothing about what
the operations compute.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Callable

import torch

from specchat import paths

COMPILE_FLAGS = ("-O3", "-fno-trapping-math", "-fopenmp", "-std=c++17", "-shared", "-fPIC", "-w")
"""-fopenmp: at::parallel_for's threads are OpenMP's (torch's own libgomp, already loaded).
No -ffast-math: the sources' sums must keep the order they are written in.
-fno-trapping-math: no float operation raises a trap here, so the compiler may compute both
sides of a comparison (the clamp in rows_kernel.cpp's e^x) and vectorize the loop; without
AVX-512's masks it otherwise leaves the activation and the softmax scalar (5 times slower on
AVX2). Every value stays the same."""
TARGET = "native"
"""-march: the instructions of the CPU it compiles on, which pick a source's code path
(q4k_kernel.cpp has them for AVX-512 VNNI, AVX-VNNI and AVX2; tests/avx2_build.py builds
the others beside this CPU's)."""
OPERATORS = "specchat"
"""The namespace the operations register under (the sources' SPECCHAT_OPS): torch.ops.specchat."""


class KernelUnavailable(RuntimeError):
    """A library cannot be built or loaded here (the message says why)."""


def compile_command(source: Path, out: Path, target: str | None = None,
                    operators: str = OPERATORS) -> list[str]:
    """The compiler call that builds `source` into the shared library `out` against this
    torch, for the CPU `target` (-march; TARGET unless given), its operations under
    torch.ops.`operators`."""
    import shutil

    from torch.utils.cpp_extension import include_paths

    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        raise KernelUnavailable("no C++ compiler (c++ or g++) on PATH")
    torch_lib = Path(torch.__file__).parent / "lib"
    abi = int(torch.compiled_with_cxx11_abi())
    return [compiler, *COMPILE_FLAGS, f"-march={target or TARGET}", f"-DSPECCHAT_OPS={operators}",
            f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
            *[f"-I{p}" for p in include_paths()],
            str(source), "-o", str(out), f"-L{torch_lib}", "-ltorch", "-ltorch_cpu", "-lc10",
            f"-Wl,-rpath,{torch_lib}"]


def library_folder(source: Path, name: str) -> Path:
    """Where `source`'s library (`name`) lives: keyed by the source, this torch and this CPU."""
    from specchat.models.device.hardware import cpu_flags

    key = "|".join([source.read_text(), " ".join(COMPILE_FLAGS), TARGET, torch.__version__,
                    " ".join(sorted(cpu_flags()))])
    return paths.cache_dir() / "kernels" / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


@functools.lru_cache(maxsize=None)
def loaded_library(source: Path, name: str, what: str, folder: Path) -> Path:
    """`source` compiled into `folder` / `name`.so on first use, and loaded into torch (once
    a process); `what` names it in a failure."""
    import subprocess

    import specchat.models.int8.scripted  # noqa: F401 - defines the schemas the library fills
    from specchat.models.config.cache_build import build_once

    library_file = f"{name}.so"

    def build(out: Path) -> None:
        done = subprocess.run(compile_command(source, out / library_file), capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise KernelUnavailable(f"compiling {source.name} failed: "
                                    f"{(done.stderr.strip().splitlines() or ['?'])[-1]}")

    library = build_once(folder, build, f"{what} from {source}", [source])
    torch.ops.load_library(str(library / library_file))
    return library / library_file


def usable(folder: Path, what: str, why_not_here: Callable[[], str | None], instead: str,
           progress: Callable[[str], None]) -> bool:
    """Whether `what` (built into `folder`) runs here: `why_not_here` is None. `progress`
    hears that it compiles, the first time on this machine, and otherwise why not, then
    what runs `instead`."""
    from specchat.models.config.cache_build import is_built

    if not is_built(folder):
        progress(f"compiling {what} for this CPU (first use only, seconds)")
    why = why_not_here()
    if why is not None:
        progress(f"{what} cannot run here ({why}): {instead}")
    return why is None
