"""A draft head file's header, read without torch: the safetensors JSON header (8 bytes of
length, then JSON) gives the metadata `save_head` wrote (the target's reference, the head's
shape) and each tensor's shape. `pairs --suggest` reads heads this way, in a process that
never imports a model library; models/head/files.py reads its facts through it too.

A leaf of models/head: standard library only. Knows nothing about weights or backends.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

HEADER_LIMIT = 100 << 20
"""A larger header is no head's (safetensors' own limit)."""


def read_header(path: Path) -> tuple[dict[str, str], dict[str, list[int]]]:
    """(metadata, tensor name -> shape) of a safetensors file; `ValueError` or `OSError` for a
    file that is not one."""
    with open(path, "rb") as file:
        prefix = file.read(8)
        if len(prefix) != 8:
            raise ValueError("shorter than a safetensors header")
        (length,) = struct.unpack("<Q", prefix)
        if length > HEADER_LIMIT:
            raise ValueError("not a safetensors file (its header length is implausible)")
        header = json.loads(file.read(length))
    if not isinstance(header, dict):
        raise ValueError("not a safetensors file (its header is no table)")
    metadata = header.pop("__metadata__", None) or {}
    return metadata, {name: list(entry["shape"]) for name, entry in header.items()}


def own_parameters(shapes: dict[str, list[int]]) -> int:
    """The head's own parameters: every tensor but the rows' scales and the vocabulary."""
    return sum(math.prod(shape) for name, shape in shapes.items()
               if not name.endswith(".scale") and name != "vocab")


def vocab_rows(shapes: dict[str, list[int]]) -> int:
    """Rows of the target's output matrix the head multiplies (its output vocabulary)."""
    return shapes["vocab"][0] if "vocab" in shapes else 0


def drafted_parameters(own: int, vocab: int, hidden: int) -> int:
    """What a draft step reads: the head's own parameters and its copy of the target's output
    rows of its vocabulary."""
    return own + vocab * hidden


@dataclass(frozen=True)
class HeadSummary:
    """What `pairs --suggest` needs of a head: its target and what a draft step reads."""

    target: str
    """The reference of the target it was trained for."""
    parameters: int
    vocab: int
    hidden: int

    @property
    def weight_bytes(self) -> int:
        """Its int8 rows and its copy of the target's output rows of its vocabulary (one byte
        each): what it holds beside an int8 target, as `pairs --check` sizes it."""
        return drafted_parameters(self.parameters, self.vocab, self.hidden)


def head_summary(path: Path) -> HeadSummary:
    """The summary of the head file at `path` (`ValueError`, `KeyError` or `OSError` for a
    file that is no readable head)."""
    metadata, shapes = read_header(path)
    hidden = int(json.loads(metadata["shape"])["hidden"])
    return HeadSummary(metadata.get("target", ""), own_parameters(shapes), vocab_rows(shapes),
                       hidden)
