"""Building a folder in the user cache once, atomically.

The folder is written into a temporary sibling and renamed into place, with a
marker file last, so an interrupted build never leaves a folder that looks done.
Used for converted GGUF models and assembled drafts.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

MARKER = "specchat-built.txt"


def is_built(folder: Path) -> bool:
    return (folder / MARKER).is_file()


def build_once(target: Path, write: Callable[[Path], object], note: str) -> Path:
    """`target`, running `write(staging_folder)` first unless it was built before."""
    if is_built(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    try:
        write(staging)
        (staging / MARKER).write_text(note + "\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
