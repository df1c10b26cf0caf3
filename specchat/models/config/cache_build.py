"""Building a folder in the user cache once, atomically, and dropping the ones nothing can reach.

The folder is written into a temporary sibling and renamed into place, with a
marker file last, so an interrupted build never leaves a folder that looks done.
Used for converted GGUF models, their int8 form, tokenizers, facts and assembled drafts.

Each cache folder is keyed by its source files' paths, sizes and modification times
(the callers' keys), so a reinstalled or moved model, a new virtual environment or a
retrained draft gets a new folder, and the old one could never be read again. The folder
records those source files; when a folder is built, every sibling of the same model (its
name around another digest) whose recorded source is gone or has changed is removed, as is
a staging folder a killed build left a day ago. Only names are compared for the others,
so a folder of hundreds of entries costs a listing, not hundreds of reads.
A folder whose source is still in place (another environment's copy) stays. Folders built
before sources were recorded are left alone. A full disk while building is one line
naming the folder (`DiskFull`), the staging folder removed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from specchat.errors import disk_full

MARKER = "specchat-built.txt"
SOURCES = "specchat-sources.json"
STAGING_PREFIX = ".building-"
ABANDONED_AFTER_S = 24 * 3600
"""A staging folder this old belongs to a build that was killed, not to one under way."""


def is_built(folder: Path) -> bool:
    return (folder / MARKER).is_file()


def build_once(target: Path, write: Callable[[Path], object], note: str,
               sources: Sequence[Path] = ()) -> Path:
    """`target`, running `write(staging_folder)` first unless it was built before; a new
    build records `sources` (the files its key was made from) and drops stale siblings."""
    if is_built(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=target.parent))
        try:
            write(staging)
            (staging / SOURCES).write_text(json.dumps([fingerprint(Path(p)) for p in sources]))
            (staging / MARKER).write_text(note + "\n")
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as error:
        full = disk_full(error, target.parent, note)
        if full is None:
            raise
        raise full from None
    remove_unreachable(target.parent, keep=target)
    return target


def fingerprint(path: Path) -> dict[str, object]:
    """What a cache key knows of a source file: its resolved path, size and whole-second mtime
    (size and mtime None when the file is gone)."""
    try:
        stat = path.stat()
    except OSError:
        return {"path": str(path), "size": None, "mtime": None}
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime": int(stat.st_mtime)}


def is_stale(folder: Path) -> bool:
    """Whether a built folder's recorded sources are gone or changed (False when it recorded
    none: built before sources were recorded, or from nothing but a pinned hash)."""
    try:
        recorded = json.loads((folder / SOURCES).read_text())
    except (OSError, ValueError):
        return False
    return any(fingerprint(Path(item["path"])) != item for item in recorded)


def is_abandoned(staging: Path, now: float) -> bool:
    """Whether a staging folder was last written long enough ago to be a killed build's."""
    try:
        return now - staging.stat().st_mtime > ABANDONED_AFTER_S
    except OSError:
        return False


KEYED_NAME = re.compile(r"^(?P<model>.*)-[0-9a-f]{12}(?P<kind>(?:-.*)?)$")
"""A cache folder's name: the model's name, the 12-digit digest of its key, and what it
holds when a model has several (`-v3`, `-tokenizer-core`)."""


def same_model(name: str, other: str) -> bool:
    """Whether two cache folders hold the same thing of the same model under another key."""
    mine, theirs = KEYED_NAME.match(name), KEYED_NAME.match(other)
    return (mine is not None and theirs is not None
            and (mine["model"], mine["kind"]) == (theirs["model"], theirs["kind"]))


def remove_unreachable(parent: Path, keep: Path) -> None:
    """Remove the folders under `parent`, `keep` aside, that no key can reach any more: the
    same model's under a stale key, and staging a killed build left."""
    now = time.time()
    for folder in parent.iterdir():
        if folder.name.startswith(STAGING_PREFIX):
            unreachable = is_abandoned(folder, now)
        else:
            unreachable = (folder != keep and same_model(folder.name, keep.name)
                           and is_built(folder) and is_stale(folder))
        if unreachable:
            shutil.rmtree(folder, ignore_errors=True)
