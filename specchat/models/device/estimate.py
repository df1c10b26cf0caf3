"""How big a model is before loading it: parameters and bytes from its folder or file.

Read from the safetensors headers where the folder has them (exact: every
tensor's shape), else counted from config.json for Llama-family shapes
(embeddings, attention, MLP, norms, head). Bytes follow the dtype the model will
load in, or bitsandbytes' storage for 8bit (1 byte a weight) and 4bit (half a
byte, plus one scale per 64 weights). A GGUF file's shape is models/gguf/shape.py's (read
from the file's header). Knows nothing about loading or devices.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from specchat.errors import DamagedWeights

BYTES_PER_WEIGHT = {"none": None, "8bit": 1.0, "4bit": 0.5 + 4 / 64}
"""Storage of a quantized linear weight (4bit: nf4 nibble + a float32 absmax per 64)."""


@dataclass(frozen=True)
class ModelSize:
    """Parameters of a model, split into those quantization touches and the rest."""

    linear: int
    """Weights of the decoder layers' linear projections (what bitsandbytes quantizes)."""
    other: int
    """Embeddings, head, norms, biases: kept in the compute dtype."""
    source: str
    """Where the count came from: "safetensors headers", "config.json" or "GGUF header"."""
    stored_bytes: int | None = None
    """Bytes of the weights as a GGUF file stores them (already quantized); None elsewhere."""

    @property
    def parameters(self) -> int:
        return self.linear + self.other

    def weight_bytes(self, element_size: int, quantization: str = "none") -> int:
        if self.stored_bytes is not None:
            return self.stored_bytes
        per_weight = BYTES_PER_WEIGHT[quantization] or element_size
        return int(self.linear * per_weight + self.other * element_size)


def model_size(folder: Path | str) -> ModelSize | None:
    """The size of the model saved in `folder`, or None where neither source is readable."""
    folder = Path(folder)
    files = sorted(folder.glob("*.safetensors"))
    if files:
        try:
            return size_from_headers(files)
        except (OSError, ValueError, KeyError):
            pass
    config = folder / "config.json"
    if config.is_file():
        try:
            return size_from_config(json.loads(config.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return None
    return None


def size_from_headers(files: list[Path]) -> ModelSize:
    linear = other = 0
    for file in files:
        for name, numel in tensor_sizes(file):
            if is_linear(name):
                linear += numel
            else:
                other += numel
    return ModelSize(linear, other, "safetensors headers")


def safetensors_header(file: Path) -> tuple[dict, int]:
    """(the JSON header, where the data starts) of a safetensors file: the one reader of these
    headers. The declared length is capped by the file's size (a garbage one is named, never
    allocated: `DamagedWeights`); a header that is no JSON object is a ValueError."""
    size = file.stat().st_size
    with open(file, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise DamagedWeights(f"{size:,} bytes, shorter than its header")
        length = struct.unpack("<Q", head)[0]
        if length > size - 8:
            raise DamagedWeights(f"its header declares {length:,} bytes of metadata, more than "
                                 f"the {size:,}-byte file holds")
        header = json.loads(handle.read(length))
    if not isinstance(header, dict):
        raise ValueError("its header is no JSON object")
    return header, 8 + length


def tensor_sizes(file: Path):
    """(name, element count) of every tensor in a safetensors file, from its header only."""
    header, _ = safetensors_header(file)
    for name, info in header.items():
        if name == "__metadata__":
            continue
        numel = 1
        for dim in info["shape"]:
            numel *= int(dim)
        yield name, numel


def is_linear(name: str) -> bool:
    """A decoder layer's projection weight (q/k/v/o, gate/up/down): what quantization stores small."""
    return ".layers." in name and name.endswith("proj.weight")


def size_from_config(config: dict) -> ModelSize:
    """Llama-family parameter count from config.json."""
    hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    inter, vocab = int(config["intermediate_size"]), int(config["vocab_size"])
    attention = hidden * head_dim * (2 * heads + 2 * kv_heads)
    mlp = 3 * hidden * inter
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings", False) else 2)
    norms = hidden * (2 * layers + 1)
    return ModelSize(layers * (attention + mlp), embeddings + norms, "config.json")


def kv_bytes_per_token(config: dict, element_size: int) -> int:
    """Bytes of keys and values one token adds across every layer."""
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    return 2 * int(config["num_hidden_layers"]) * kv_heads * head_dim * element_size


def file_type_name(value: str | None) -> str | None:
    """GGUF's name of a `general.file_type` number: 15 -> "Q4_K_M", 0 -> "F32"; None if unknown."""
    import gguf

    try:
        name = gguf.LlamaFileType(int(value or "")).name
    except ValueError:
        return None
    return None if name == "GUESSED" else name.removeprefix("MOSTLY_").removeprefix("ALL_")


def params_label(count: int) -> str:
    """A parameter count to three significant digits: 134515008 -> "135M", 1543714304 -> "1.54B"."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g}{unit}"
    return str(count)


def size_label(claimed: str | None, count: int) -> str:
    """A GGUF model's size as specchat shows it (`run`'s stats, the panel, `pairs --check`):
    the file's own `general.size_label` ("1.5B") where it has one, not a count of its tensors
    (a Qwen2.5 1.5B file holds its tied output matrix twice: 1777M); else `count` as a label."""
    return str(claimed or "").strip() or params_label(count)
