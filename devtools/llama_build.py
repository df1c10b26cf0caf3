"""Building llama.cpp's own programs (`llama-bench`, `llama-speculative-simple`) from the
llama.cpp that the installed llama-cpp-python vendors, so `specchat bench` compares specchat
with llama.cpp's programs on the very kernels specchat's llama.cpp backend runs.

`python -m devtools build-llama` (`make llama-tools`): the source distribution of the
installed version comes from pip (`pip download --no-binary :all: --no-deps
llama-cpp-python==VERSION`, served from pip's cache where it is there), is unpacked under the
user cache (`llama.cpp/src-VERSION`), configured with CMake in Release mode (plus the flags in
CMAKE_ARGS, as pip's build of the bindings reads them: `-DGGML_CUDA=on` for a CUDA build) and
built for the two programs only, which are copied to specchat's `default_folder`
(specchat/bench/llama_programs.py), where `bench` looks for them unless told otherwise
(`--llama-bin`). A later build only rebuilds what changed. Developer-only (not in the wheel);
knows nothing about benchmarks.
"""

from __future__ import annotations

import importlib.metadata
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Callable

from specchat.bench.llama_programs import default_folder, programs_root
from specchat.errors import UsageError

PROGRAMS = ("llama-bench", "llama-speculative-simple")
CMAKE_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_EXAMPLES=ON",
               "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_CURL=OFF",
               "-DLLAMA_OPENSSL=OFF", "-DBUILD_SHARED_LIBS=OFF"]
"""Release, static, the programs only: no server, tests, network."""

Note = Callable[[str], None]


def bindings_version() -> str:
    try:
        return importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        raise UsageError("llama-cpp-python is not installed, so there is no llama.cpp to build "
                         "its programs from: pip install 'specchat[llama]'") from None


root = programs_root


def build(note: Note = lambda _: None, jobs: int | None = None, out: Path | None = None) -> Path:
    """Build the programs and copy them to `out` (default: where `bench` looks for them)."""
    version = bindings_version()
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise UsageError(f"building llama.cpp's programs needs {tool}: install it (cmake: "
                             "pip install cmake; a C++ compiler: build-essential, Xcode tools)")
    source = sources(version, note)
    folder = root() / f"build-{version}"
    configure(source, folder, note)
    compile_programs(folder, jobs or os.cpu_count() or 2, note)
    return install(folder, out or default_folder(version))


def sources(version: str, note: Note) -> Path:
    """The vendored llama.cpp of llama-cpp-python `version`, unpacked once."""
    unpacked = root() / f"src-{version}"
    vendored = unpacked / "vendor" / "llama.cpp"
    if (vendored / "CMakeLists.txt").is_file():
        return vendored
    note(f"fetching the sources of llama-cpp-python {version} (pip's cache where it has them)")
    downloads = root() / "sdist"
    run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
         "-d", str(downloads), f"llama-cpp-python=={version}"], "pip download")
    archive = next(downloads.glob(f"llama_cpp_python-{version}.tar.gz"), None)
    if archive is None:
        raise UsageError(f"pip fetched no source archive of llama-cpp-python {version} into "
                         f"{downloads}")
    unpack(archive, unpacked)
    return vendored


def unpack(archive: Path, unpacked: Path) -> None:
    """Unpack the sdist's one top folder to `unpacked`, through a temporary sibling."""
    unpacked.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpacking-", dir=unpacked.parent))
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(staging, filter="data")
        [top] = list(staging.iterdir())
        shutil.rmtree(unpacked, ignore_errors=True)
        os.replace(top, unpacked)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def configure(source: Path, folder: Path, note: Note) -> None:
    if (folder / "CMakeCache.txt").is_file():
        return
    note(f"configuring llama.cpp in {folder}")
    extra = shlex.split(os.environ.get("CMAKE_ARGS", ""))
    run(["cmake", "-S", str(source), "-B", str(folder), *CMAKE_FLAGS, *extra], "cmake configure")


def compile_programs(folder: Path, jobs: int, note: Note) -> None:
    note(f"compiling {', '.join(PROGRAMS)} with {jobs} jobs (minutes on a small machine)")
    run(["cmake", "--build", str(folder), "-j", str(jobs), "--target", *PROGRAMS], "cmake build")


def install(folder: Path, out: Path) -> Path:
    """Copy the built programs to `out`, each replacing any older one in one step."""
    out.mkdir(parents=True, exist_ok=True)
    for program in PROGRAMS:
        built = folder / "bin" / program
        if not built.is_file():
            raise UsageError(f"the build made no {built}: see {root() / 'build.log'}")
        staging = out / f".{program}.new"
        shutil.copy2(built, staging)
        os.replace(staging, out / program)
    return out


def run(command: list[str], what: str) -> None:
    """Run a build step, its output appended to llama.cpp/build.log; a one-line error naming
    the log when it fails."""
    log = root() / "build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as handle:
        handle.write(f"$ {shlex.join(command)}\n")
        handle.flush()
        done = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise UsageError(f"{what} failed (exit {done.returncode}): see {log}")
