"""Whether a GGUF file is whole, read from its header alone, before any backend loads it.

A GGUF file is a header (magic, version, metadata, tensor infos: each tensor's shape, type
and offset into the data), padding to the alignment, then the tensor data. A file cut
short (an interrupted download or copy) still has its header, and each backend fails on
it in its own words ("unsupported architecture" in llama.cpp, "cannot reshape array" in
the gguf reader). `check_gguf_file` computes the size the tensors need from the header and
says "truncated or corrupt" with both sizes; both backends call it first. Standard library
and the `gguf` package's type sizes only; loads no tensor.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

from specchat.errors import ModelNotFound

SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
           12: "d"}
"""GGUF metadata value types of a fixed size, as struct formats."""
STRING, ARRAY = 8, 9
DEFAULT_ALIGNMENT = 32


class Truncated(Exception):
    """The header ends before it should."""


def read(handle: BinaryIO, fmt: str):
    size = struct.calcsize("<" + fmt)
    data = handle.read(size)
    if len(data) < size:
        raise Truncated
    return struct.unpack("<" + fmt, data)[0]


def read_string(handle: BinaryIO) -> bytes:
    length = read(handle, "Q")
    data = handle.read(length)
    if len(data) < length:
        raise Truncated
    return data


def read_value(handle: BinaryIO, kind: int):
    """One metadata value (arrays are read through and returned as None)."""
    if kind == STRING:
        return read_string(handle)
    if kind == ARRAY:
        item, count = read(handle, "I"), read(handle, "Q")
        for _ in range(count):
            read_value(handle, item)
        return None
    if kind not in SCALARS:
        raise ValueError(f"unknown metadata type {kind}")
    return read(handle, SCALARS[kind])


def tensor_bytes(dims: list[int], kind: int) -> int:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    elements = 1
    for dim in dims:
        elements *= dim
    return elements // block * size


def needed_bytes(handle: BinaryIO) -> int:
    """The file size the header's tensors need: data start plus the furthest tensor's end."""
    if handle.read(4) != b"GGUF":
        raise ValueError("it does not start with 'GGUF'")
    read(handle, "I")  # version
    tensors, entries = read(handle, "Q"), read(handle, "Q")
    alignment = DEFAULT_ALIGNMENT
    for _ in range(entries):
        key, kind = read_string(handle), read(handle, "I")
        value = read_value(handle, kind)
        if key == b"general.alignment" and isinstance(value, int):
            alignment = value
    end = 0
    for _ in range(tensors):
        read_string(handle)
        dims = [read(handle, "Q") for _ in range(read(handle, "I"))]
        kind, offset = read(handle, "I"), read(handle, "Q")
        end = max(end, offset + tensor_bytes(dims, kind))
    start = -(-handle.tell() // alignment) * alignment
    return start + end


def check_gguf_file(path: Path) -> None:
    """A one-line `ModelNotFound` if `path` is not a whole GGUF file."""
    where = f"cannot load GGUF file {path}"
    actual = path.stat().st_size
    try:
        with open(path, "rb") as handle:
            needed = needed_bytes(handle)
    except Truncated:
        raise ModelNotFound(f"{where}: truncated or corrupt: its header ends early "
                            f"({actual:,} bytes in all): download or copy it again") from None
    except (ValueError, KeyError, struct.error) as error:
        raise ModelNotFound(f"{where}: not a GGUF model file ({error}): point models.toml at "
                            "a .gguf model file") from None
    if actual < needed:
        raise ModelNotFound(f"{where}: truncated or corrupt: its tensors need {needed:,} bytes, "
                            f"the file has {actual:,}: download or copy it again")
