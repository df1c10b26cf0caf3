"""Whether a GGUF file is whole, read from its header alone, before any backend loads it.

A GGUF file is a header (magic, version, metadata, tensor infos: each tensor's shape, type
and offset into the data), padding to the alignment, then the tensor data. A file cut
short (an interrupted download or copy) still has its header, and each backend fails on
it in its own words ("unsupported architecture" in llama.cpp, "cannot reshape array" in
the gguf reader). `check_gguf_file` computes the size the tensors need from the header and
says "truncated or corrupt" with both sizes; both backends call it first. Every length and
count in the header is capped by the bytes left in the file: a garbage one (2^62) is named,
never allocated (it was a MemoryError in both backends). The words are those of
models/torch_backend/safetensors_check.py for safetensors files (both from
specchat/errors.py's `DamagedWeights`, `damaged` and `check_whole`). Standard library
and the `gguf` package's type sizes only; loads no tensor.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

from specchat.errors import DamagedWeights, ModelNotFound, check_whole, damaged

SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
           12: "d"}
"""GGUF metadata value types of a fixed size, as struct formats."""
STRING, ARRAY = 8, 9
DEFAULT_ALIGNMENT = 32


MAX_DIMS = 4
"""GGML tensors have at most four dimensions."""
SMALLEST = {STRING: 8, ARRAY: 12} | {kind: struct.calcsize("<" + fmt) for kind, fmt in SCALARS.items()}
"""The fewest bytes a metadata value of each type takes (a string: its length; an array:
its item type and count)."""
SMALLEST_TENSOR_INFO = 8 + 4 + 4 + 8
"""A tensor's info without name or dimensions: name length, dimension count, type, offset."""


class HeaderReader:
    """Reads a GGUF header, every length and count capped by the bytes left in the file, so a
    garbage length (2^62) is named instead of allocated: a `DamagedWeights`, as is a header
    that ends early."""

    def __init__(self, handle: BinaryIO, size: int):
        self.handle, self.size = handle, size

    def read(self, fmt: str):
        size = struct.calcsize("<" + fmt)
        data = self.handle.read(size)
        if len(data) < size:
            raise DamagedWeights(f"its header ends early ({self.size:,} bytes in all)")
        return struct.unpack("<" + fmt, data)[0]

    def count(self, what: str, each: int, fmt: str = "Q") -> int:
        """A count of things of at least `each` bytes, no more than the rest of the file holds."""
        at, number = self.handle.tell(), self.read(fmt)
        if number * each > self.size - self.handle.tell():
            raise DamagedWeights(f"its header declares {number:,} {what} at byte {at:,}, more "
                                 f"than the {self.size:,}-byte file can hold")
        return number

    def string(self) -> bytes:
        length = self.count("bytes of text", 1)
        return self.handle.read(length)

    def value(self, kind: int):
        """One metadata value (arrays are read through and returned as None)."""
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            item = self.read("I")
            if item not in SMALLEST:
                raise ValueError(f"unknown metadata type {item}")
            for _ in range(self.count("array items", SMALLEST[item])):
                self.value(item)
            return None
        if kind not in SCALARS:
            raise ValueError(f"unknown metadata type {kind}")
        return self.read(SCALARS[kind])


def tensor_bytes(dims: list[int], kind: int) -> int:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    elements = 1
    for dim in dims:
        elements *= dim
    return elements // block * size


def needed_bytes(handle: BinaryIO, size: int) -> int:
    """The file size the header's tensors need: data start plus the furthest tensor's end."""
    if handle.read(4) != b"GGUF":
        raise ValueError("it does not start with 'GGUF'")
    header = HeaderReader(handle, size)
    header.read("I")  # version
    tensors = header.count("tensors", SMALLEST_TENSOR_INFO)
    entries = header.count("metadata entries", SMALLEST[STRING] + 4)
    alignment = DEFAULT_ALIGNMENT
    for _ in range(entries):
        key, kind = header.string(), header.read("I")
        value = header.value(kind)
        if key == b"general.alignment" and isinstance(value, int) and value > 0:
            alignment = value
    end = 0
    for _ in range(tensors):
        header.string()
        dims = header.read("I")
        if dims > MAX_DIMS:
            raise DamagedWeights(f"its header gives a tensor {dims:,} dimensions (GGUF has at "
                                 f"most {MAX_DIMS})")
        shape = [header.read("Q") for _ in range(dims)]
        kind, offset = header.read("I"), header.read("Q")
        end = max(end, offset + tensor_bytes(shape, kind))
    start = -(-handle.tell() // alignment) * alignment
    return start + end


WHOLE_FILES: set[tuple[str, int, int]] = set()
"""(resolved path, size, modification time) of the files found whole in this process: a load
checks its GGUF once, not at each of its stages (three for an int8 target, a third of a
second each for Qwen2.5-Coder-1.5B's header); a file that changes is checked again."""


def check_gguf_file(path: Path) -> None:
    """A one-line `ModelNotFound` if `path` is not a whole GGUF file."""
    where = f"cannot load GGUF file {path}"
    stat = path.stat()
    actual, state = stat.st_size, (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if state in WHOLE_FILES:
        return
    try:
        with open(path, "rb") as handle:
            needed = needed_bytes(handle, actual)
    except DamagedWeights as error:
        raise damaged(where, error) from None
    except (ValueError, KeyError, struct.error) as error:
        raise ModelNotFound(f"{where}: not a GGUF model file ({error}): point models.toml at "
                            "a .gguf model file") from None
    check_whole(where, needed, actual)
    WHOLE_FILES.add(state)


def leading_metadata(path: Path) -> dict[str, object]:
    """The file's metadata up to its tokenizer's entries (architecture, sizes, rope: writers
    put them first), read without parsing the rest (gguf's own reader parses every token
    string: seconds for a large vocabulary). Text values are str, arrays are skipped;
    {} where the file is no readable GGUF."""
    found: dict[str, object] = {}
    try:
        with open(path, "rb") as handle:
            if handle.read(4) != b"GGUF":
                return {}
            header = HeaderReader(handle, path.stat().st_size)
            header.read("I")
            header.read("Q")
            for _ in range(min(header.read("Q"), LEADING_ENTRIES)):
                key = header.string().decode("utf-8", "replace")
                if key.startswith("tokenizer."):
                    break
                value = header.value(header.read("I"))
                found[key] = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    except (OSError, ValueError, struct.error, DamagedWeights):
        return found
    return found


LEADING_ENTRIES = 64
"""Metadata entries read at most before the tokenizer's."""
