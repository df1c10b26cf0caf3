"""A GGUF model's weights as int8 rows for the int8 backend, converted once and cached.

The first load reads the GGUF file tensor by tensor: each is de-quantized to float32
(gguf's own de-quantizers: Q4_K, Q6_K, Q5_0, Q8_0, ...), then quantized again to int8 with
one scale per output row, so at most one float matrix is held at a time. The result is one
safetensors file under the cache folder, keyed like the other conversions by the GGUF's
path, size and modification time (`gguf.cache.cache_key`) and this format's version. A
later load reads that file, memory-mapped, in a second or two. A damaged cache file is
converted again; a GGUF that cannot be read is a one-line `ModelNotFound`.

Layout choices made here, once:
- q, k and v are one matrix (one kernel call), gate and up another;
- rope runs on adjacent pairs of each head's dimensions: llama files are stored that way
  already, and for NEOX-style models (qwen2) the rows of q and k (and their biases) are
  reordered into it. Attention is unchanged, since q and k are reordered alike;
- the output matrix is the token embedding where the file has none (tied embeddings);
- llama 3's rope frequency factors (`rope_freqs.weight`) are kept as they are.
Knows nothing about decoding, tokenizers or the forward pass.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from specchat import paths
from specchat.errors import ModelNotFound
from specchat.models.blocks.int8_rows import quantize_rows

FORMAT = 3
"""Bumped whenever the cached layout changes, so old caches are never misread."""
ARCHITECTURES = ("llama", "qwen2")
NEOX = ("qwen2",)
"""Architectures whose rope rotates the two halves of a head (their q/k rows are reordered)."""
WEIGHTS_FILE = "int8.safetensors"


@dataclass(frozen=True)
class Architecture:
    """What the forward needs to know about a model, read from its GGUF metadata."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    rope_base: float
    context: int
    vocab: int
    qkv_bias: bool


@dataclass(frozen=True)
class FileFacts:
    """What the loader shows or checks about the GGUF file, read once while converting (a
    GGUF header with a large vocabulary takes seconds to parse)."""

    file_type: str
    """"Q4_K_M", "Q4_1", ... ("GGUF" where the file names none)."""
    size_label: str
    """The file's own "1.5B", else its parameter count."""
    eos: list[int]
    """The file's EOS and EOT ids."""
    vocabulary: str
    """sha256 over the token texts in id order: equal for two files with one vocabulary."""
    draft_vocab: list[int] | None
    """A `specchat distill` draft's reduced vocabulary (`specchat.draft.vocab`)."""


@dataclass
class Converted:
    """A model's int8 form: its architecture, its file's facts, and its tensors."""

    arch: Architecture
    facts: FileFacts
    tensors: dict[str, torch.Tensor]


def architecture_problem(name: str) -> str | None:
    """Why a GGUF architecture cannot run on the int8 backend, or None."""
    if name in ARCHITECTURES:
        return None
    return f"architecture {name!r} (the int8 backend runs {' and '.join(ARCHITECTURES)})"


def metadata_problem(metadata: dict) -> str | None:
    """Why a GGUF file's metadata (its leading entries, `gguf.header.leading_metadata`)
    says the int8 forward cannot run it, or None: its architecture, a rope scaling other
    than llama 3's frequency factors (linear, yarn), or rope on part of each head."""
    name = str(metadata.get("general.architecture"))
    problem = architecture_problem(name)
    if problem:
        return problem
    scaling = metadata.get(f"{name}.rope.scaling.type")
    if scaling not in (None, "none"):
        return f"rope scaling {scaling!r} (the int8 backend runs plain rope and llama 3's factors)"
    heads = int(metadata.get(f"{name}.attention.head_count") or 1)
    head_dim = int(metadata.get(f"{name}.embedding_length") or 0) // heads
    rotated = metadata.get(f"{name}.rope.dimension_count")
    if rotated is not None and head_dim and int(rotated) != head_dim:
        return f"rope on {rotated} of each head's {head_dim} dimensions"
    return None


def read_architecture(reader) -> Architecture:
    """The `Architecture` of an open `gguf.GGUFReader` (`ModelNotFound` for an unsupported one)."""
    name = str(field(reader, "general.architecture"))
    metadata = {key: found.contents() for key, found in reader.fields.items()
                if not key.startswith("tokenizer.")}
    problem = metadata_problem(metadata)
    if problem:
        raise ModelNotFound(f"{reader.data.filename}: the int8 backend cannot run it: {problem}; "
                            "use backend = \"llama.cpp\"")
    heads = int(field(reader, f"{name}.attention.head_count"))
    hidden = int(field(reader, f"{name}.embedding_length"))
    names = {tensor.name: tensor for tensor in reader.tensors}
    return Architecture(
        name, int(field(reader, f"{name}.block_count")), hidden, heads,
        int(field(reader, f"{name}.attention.head_count_kv", heads)), hidden // heads,
        float(field(reader, f"{name}.attention.layer_norm_rms_epsilon")),
        float(field(reader, f"{name}.rope.freq_base", 10000.0)),
        int(field(reader, f"{name}.context_length", 2048)),
        int(names["token_embd.weight"].shape[-1]), "blk.0.attn_q.bias" in names)


def field(reader, key: str, default=None):
    """One metadata value of a GGUF file (`default` where it is absent)."""
    found = reader.fields.get(key)
    if found is None:
        if default is None:
            raise ModelNotFound(f"{reader.data.filename}: GGUF key {key} is missing")
        return default
    return found.contents()


def read_facts(reader) -> FileFacts:
    """The `FileFacts` of an open `gguf.GGUFReader`."""
    import hashlib

    from specchat.models.device.estimate import file_type_name, size_label

    tokens = field(reader, "tokenizer.ggml.tokens", [])
    eos = [int(field(reader, key, -1)) for key in ("tokenizer.ggml.eos_token_id",
                                                   "tokenizer.ggml.eot_token_id")]
    draft = field(reader, "specchat.draft.vocab", [])
    count = sum(int(tensor.n_elements) for tensor in reader.tensors)
    return FileFacts(file_type_name(str(field(reader, "general.file_type", ""))) or "GGUF",
                     size_label(field(reader, "general.size_label", ""), count),
                     [token for token in eos if token >= 0],
                     hashlib.sha256("\0".join(map(str, tokens)).encode()).hexdigest(),
                     [int(token) for token in draft] or None)


def cached_file(gguf: Path) -> Path:
    from specchat.models.gguf.cache import cache_key

    return paths.cache_dir() / "int8" / f"{cache_key(gguf)}-v{FORMAT}" / WEIGHTS_FILE


def converted(gguf: Path, progress: Callable[[str], None] = lambda _: None) -> Converted:
    """The int8 form of `gguf`, converted on first use (module docstring)."""
    from specchat.models.config.cache_build import build_once, is_built
    from specchat.models.gguf.cache import readable

    target = cached_file(gguf)
    if not is_built(target.parent):
        progress(f"converting {gguf.name} to int8 (first use only)")
    folder = readable(gguf, lambda: build_once(target.parent, lambda out: convert(gguf, out),
                                               f"int8 weights of {gguf}", [gguf]))
    loaded = read_cached(folder / WEIGHTS_FILE)
    if loaded is None:  # damaged after it was built: convert again, once
        progress(f"the int8 cache of {gguf.name} was damaged: converting it again")
        remove_folder(folder)
        folder = build_once(target.parent, lambda out: convert(gguf, out), f"int8 weights of {gguf}",
                            [gguf])
        loaded = read_cached(folder / WEIGHTS_FILE)
        if loaded is None:
            raise ModelNotFound(f"cannot write a readable int8 cache of {gguf} under {folder}: "
                                f"check the disk, or remove {folder.parent}")
    return loaded


def read_cached(path: Path) -> Converted | None:
    """The cached file's contents, or None when it is missing or damaged."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    try:
        with safe_open(str(path), "pt") as handle:
            meta = handle.metadata()
        return Converted(Architecture(**json.loads(meta["architecture"])),
                         FileFacts(**json.loads(meta["facts"])), load_file(str(path)))
    except Exception:  # noqa: BLE001 - any damage (cut, overwritten, wrong keys) means rebuild
        return None


def remove_folder(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


def opened(gguf: Path) -> tuple[Any, Architecture, dict[str, Any]]:
    """(an open `gguf.GGUFReader`, the file's `Architecture`, its tensors by name)."""
    import gguf as gguf_lib

    reader = gguf_lib.GGUFReader(str(gguf))
    return reader, read_architecture(reader), {tensor.name: tensor for tensor in reader.tensors}


def convert(gguf: Path, out: Path) -> None:
    """Write `gguf`'s int8 form into the folder `out` (module docstring)."""
    from safetensors.torch import save_file

    reader, arch, tensors = opened(gguf)
    result: dict[str, torch.Tensor] = {}
    for layer in range(arch.layers):
        result.update(layer_tensors(arch, tensors, layer))
    embed = matrix(tensors["token_embd.weight"])
    result.update(rows_of("embed", embed))
    head = tensors.get("output.weight")
    result.update(rows_of("head", embed if head is None else matrix(head)))
    result["norm"] = matrix(tensors["output_norm.weight"])
    if "rope_freqs.weight" in tensors:  # llama 3's rope: each frequency divided by a factor
        result["rope_factors"] = matrix(tensors["rope_freqs.weight"])
    save_file(result, str(out / WEIGHTS_FILE),
              metadata={"architecture": json.dumps(asdict(arch)),
                        "facts": json.dumps(asdict(read_facts(reader)))})


def fused_parts(arch: Architecture, layer: int) -> dict[str, list[tuple[str, Callable]]]:
    """One layer's fused matrices under this cache's names: each part's GGUF tensor name and
    what orders its rows (rope's adjacent pairs for q and k; q4k.py fuses the same way)."""
    neox = arch.name in NEOX
    block = f"blk.{layer}."

    def paired(heads: int) -> Callable:
        return lambda weight: adjacent_pairs(weight, heads, neox)

    def kept(weight):
        return weight

    return {"qkv": [(block + "attn_q.weight", paired(arch.heads)),
                    (block + "attn_k.weight", paired(arch.kv_heads)), (block + "attn_v.weight", kept)],
            "o": [(block + "attn_output.weight", kept)],
            "gate_up": [(block + "ffn_gate.weight", kept), (block + "ffn_up.weight", kept)],
            "down": [(block + "ffn_down.weight", kept)]}


def layer_tensors(arch: Architecture, tensors: dict, layer: int) -> dict[str, torch.Tensor]:
    """One layer's int8 matrices, norms and biases under this cache's names."""
    def read(name: str) -> torch.Tensor:
        return matrix(tensors[f"blk.{layer}.{name}"])

    out = {f"{layer}.attn_norm": read("attn_norm.weight"), f"{layer}.ffn_norm": read("ffn_norm.weight")}
    for name, parts in fused_parts(arch, layer).items():
        out.update(rows_of(f"{layer}.{name}",
                           torch.cat([order(matrix(tensors[part])) for part, order in parts])))
    if arch.qkv_bias:
        out[f"{layer}.qkv.bias"] = torch.cat([
            order(matrix(tensors[part.replace(".weight", ".bias")]))
            for part, order in fused_parts(arch, layer)["qkv"]])
    return out


def matrix(tensor) -> torch.Tensor:
    """A GGUF tensor de-quantized to float32, rows first ([out, in] for a matrix)."""
    from gguf.quants import dequantize

    return torch.from_numpy(dequantize(tensor.data, tensor.tensor_type).copy()).float()


def rows_of(name: str, weight: torch.Tensor) -> dict[str, torch.Tensor]:
    rows, scale = quantize_rows(weight)
    return {f"{name}.rows": rows.contiguous(), f"{name}.scale": scale.contiguous()}


def adjacent_pairs(weight, heads: int, neox: bool):
    """q or k rows (or bias) with each head's rope pairs adjacent: NEOX's halves (i, i + d/2)
    become (2i, 2i + 1); llama files already are. A tensor, or a GGUF tensor's raw rows (a
    numpy array: q4k.py reorders the Q4_K blocks of a row as they are)."""
    if not neox:
        return weight
    head_dim = weight.shape[0] // heads
    order = torch.arange(head_dim).view(2, head_dim // 2).t().reshape(-1)
    index = (torch.arange(heads).unsqueeze(1) * head_dim + order).reshape(-1)
    if not isinstance(weight, torch.Tensor):  # a GGUF tensor's raw rows (q4k.py)
        return weight[index.numpy()]
    return weight[index].contiguous()
