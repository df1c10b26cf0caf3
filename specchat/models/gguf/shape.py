"""A GGUF model's shape from its header alone: every tensor's element count and stored bytes
in the file's own types (its parameters, split as `ModelSize` splits them), the KV cache
one token adds from the architecture's metadata (llama.cpp keeps keys and values in f16),
its trained context and its size label. What the int8 backend's kernel choice and
`pairs --check` read. Loads no tensor and no tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specchat.models.device.estimate import ModelSize
from specchat.models.gguf.header import as_text, read_header

GGUF_KV_ELEMENT = 2
"""Bytes of one cached key or value element on llama.cpp (its default f16 cache)."""


@dataclass(frozen=True)
class GgufShape:
    """A GGUF model's size, KV cache per token and trained context, from its header."""

    size: ModelSize
    kv_bytes_per_token: int
    context_length: int
    claimed_label: str = ""
    """The size as the file labels it (`general.size_label`, "1.5B"), "" where it does not."""


def gguf_shape(path: Path | str) -> GgufShape | None:
    """The shape of the GGUF file at `path`, or None where its header cannot be read."""
    try:
        header = read_header(Path(path))
        tensors = header.tensors
        metadata = {name: as_text(found) for name, found in header.metadata.items()
                    if not name.startswith("tokenizer.")}
        arch = metadata["general.architecture"]
        linear = sum(t.elements for t in tensors if t.name.startswith("blk.") and "norm" not in t.name)
        total = sum(t.elements for t in tensors)
        stored = sum(t.stored_bytes for t in tensors)
        return GgufShape(ModelSize(linear, total - linear, "GGUF header", stored),
                         gguf_kv_bytes(metadata, arch), int(metadata.get(f"{arch}.context_length", 0)),
                         str(metadata.get("general.size_label") or ""))
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def gguf_kv_bytes(metadata: dict, arch: str) -> int:
    """Bytes of keys and values one token adds on llama.cpp, from a GGUF's metadata."""
    heads = int(metadata[f"{arch}.attention.head_count"])
    kv_heads = int(metadata.get(f"{arch}.attention.head_count_kv") or heads)
    head_dim = int(metadata[f"{arch}.embedding_length"]) // heads
    keys = int(metadata.get(f"{arch}.attention.key_length") or head_dim)
    values = int(metadata.get(f"{arch}.attention.value_length") or head_dim)
    return int(metadata[f"{arch}.block_count"]) * kv_heads * (keys + values) * GGUF_KV_ELEMENT
