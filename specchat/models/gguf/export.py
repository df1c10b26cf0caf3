"""Writing a `specchat distill` draft as a standard GGUF file that llama.cpp runs as a draft.

The file is a complete llama-architecture model. Every metadata key of the
target's GGUF is copied (tokenizer, merges, special ids, chat template,
hyperparameters) with the block count set to the draft's, so llama.cpp's own
tools accept it as a draft for that target (same tokenizer, same vocabulary
size). The token embeddings are the target's own tensor, byte for byte (the
draft shares them). The draft's layers and final norm come from
`draft.safetensors` under llama.cpp's tensor names (gguf's name map), with the
Q and K rows permuted into llama.cpp's rope layout as convert_hf_to_gguf.py
does. int8 drafts become Q8_0 with their own int8 values: each block carries
the row's scale (rounded to float16), so nothing is re-quantized.

A reduced output vocabulary V becomes a full-size `output.weight`: rows of V
are the embedding rows (byte copies when the output type is the embedding's
type), and every other row is the mean of the V rows. A token outside V thus
scores exactly the mean of the V logits, which is below the largest V logit
unless all V logits are equal: the draft's argmax is always the reduced
draft's. Storing that mean row in Q8_0/F16 moves its logit by at most
|h|_1 * max|stored - mean| (h: the normalised hidden state); `outside_row_error`
gives that number so it can be checked against the real gap (docs/gguf.md).
Its vocabulary is also stored as `specchat.draft.vocab`, so specchat can mask
exactly. Knows nothing about training, click or llama_cpp.

The one owner of how a transformers weight is named and ordered in a GGUF file
(`llama_cpp_name`, `rope_heads`, `rope_row_order`): the tests' tiny GGUF writers use them.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specchat.errors import ModelNotFound, PairError, UsageError
from specchat.models.torch_backend.shipped_draft import INT8_SCALE, WEIGHTS_FILE, DraftSpec

GGUF_TYPES = ("q8_0", "f16", "f32")
"""Encodings of the draft's matrices (and of a reduced draft's output) in the file."""
PERMUTED = {"self_attn.q_proj.weight": "head_count", "self_attn.k_proj.weight": "head_count_kv"}
"""Projections whose rows llama.cpp expects in its interleaved rope order."""
DROPPED_KEYS = ("GGUF.", "general.architecture", "general.size_label", "general.file_type",
                "general.name", "llama.block_count")
"""Target keys not copied: the writer's own, and those the draft sets to its own values."""
KEY_PREFIX = "specchat.draft."


@dataclass
class ExportResult:
    """What `write_draft_gguf` wrote."""

    path: Path
    vocab_size: int
    """Rows of the file's output (the target's vocabulary size)."""
    reduced: int | None
    """Size of the draft's reduced vocabulary, None when it proposes from all tokens."""
    layers: int
    gguf_type: str
    size_bytes: int


def ggml_type(name: str):
    import gguf

    if name not in GGUF_TYPES:
        raise UsageError(f"GGUF type '{name}' is not supported: pick one of {', '.join(GGUF_TYPES)}")
    return {"q8_0": gguf.GGMLQuantizationType.Q8_0, "f16": gguf.GGMLQuantizationType.F16,
            "f32": gguf.GGMLQuantizationType.F32}[name]


def file_type(name: str) -> int:
    import gguf

    return {"q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "f16": gguf.LlamaFileType.MOSTLY_F16,
            "f32": gguf.LlamaFileType.ALL_F32}[name]


def open_target(path: Path):
    """The target's GGUFReader, with one-line errors for a missing or unreadable file."""
    import gguf

    if not Path(path).is_file():
        raise ModelNotFound(f"target GGUF file {path} does not exist: check the draft's target")
    try:
        return gguf.GGUFReader(path)
    except (ValueError, OSError) as error:
        raise ModelNotFound(f"target {path} is not a readable GGUF file ({error}): "
                            "point the draft at a GGUF target") from None


def field(reader, key: str, default=None):
    entry = reader.fields.get(key)
    return default if entry is None else entry.contents()


def target_shape(reader, path: Path) -> dict:
    """The target's architecture numbers the draft must agree with."""
    arch = field(reader, "general.architecture")
    if arch != "llama":
        raise UsageError(f"target {path} has architecture '{arch}': GGUF export of a draft "
                         "supports llama-architecture targets only")
    embd = reader_tensor(reader, "token_embd.weight", path)
    return {"blocks": field(reader, "llama.block_count"),
            "hidden": field(reader, "llama.embedding_length"),
            "head_count": field(reader, "llama.attention.head_count"),
            "head_count_kv": field(reader, "llama.attention.head_count_kv",
                                   field(reader, "llama.attention.head_count")),
            "vocab": int(embd.shape[1])}


def reader_tensor(reader, name: str, path: Path):
    for tensor in reader.tensors:
        if tensor.name == name:
            return tensor
    raise ModelNotFound(f"target {path} has no tensor {name}: it is not a complete llama GGUF")


def check_fits(spec: DraftSpec, state: dict, shape: dict, folder: Path, path: Path) -> None:
    """The draft's layers, hidden size and vocabulary are the target's."""
    hidden = state["model.norm.weight"].shape[0]
    problem = None
    if hidden != shape["hidden"]:
        problem = f"hidden size {hidden} vs the target's {shape['hidden']}"
    elif max(spec.layers) >= shape["blocks"]:
        problem = f"layer {max(spec.layers)} of a target with {shape['blocks']} layers"
    elif spec.vocab and max(spec.vocab) >= shape["vocab"]:
        problem = f"token id {max(spec.vocab)} in a vocabulary of {shape['vocab']}"
    if problem:
        raise PairError(f"draft {folder} does not fit target {path} ({problem}): "
                        "export it against the target it was trained for")


def write_draft_gguf(folder: Path, spec: DraftSpec, target: Path, out: Path,
                     gguf_type: str = "q8_0") -> ExportResult:
    """Write the draft in `folder` (trained for the GGUF `target`) to `out`, atomically."""
    import gguf
    from safetensors.torch import load_file

    qtype = ggml_type(gguf_type)
    reader = open_target(target)
    shape = target_shape(reader, target)
    state = load_file(str(Path(folder) / WEIGHTS_FILE))
    check_fits(spec, state, shape, Path(folder), target)
    staging = out.with_name(out.name + ".tmp")
    writer = gguf.GGUFWriter(staging, "llama")
    copy_metadata(reader, writer, spec, gguf_type)
    tensors = [("token_embd.weight", *raw(reader_tensor(reader, "token_embd.weight", target)))]
    tensors += own_tensors(state, len(spec.layers), shape, qtype)
    if spec.vocab:
        embd = reader_tensor(reader, "token_embd.weight", target)
        tensors.append(("output.weight", output_rows(embd, spec.vocab, qtype), qtype))
    for name, data, dtype in tensors:
        writer.add_tensor(name, data, raw_dtype=dtype)
    finish(writer)
    os.replace(staging, out)
    return ExportResult(out, shape["vocab"], len(spec.vocab) if spec.vocab else None,
                        len(spec.layers), gguf_type, out.stat().st_size)


def finish(writer) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def copy_metadata(reader, writer, spec: DraftSpec, gguf_type: str) -> None:
    """The target's keys (tokenizer included), then the draft's own."""
    import gguf

    for entry in reader.fields.values():
        if entry.name.startswith(DROPPED_KEYS):
            continue
        sub_type = entry.types[-1] if entry.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(entry.name, entry.contents(), entry.types[0], sub_type=sub_type)
    writer.add_block_count(len(spec.layers))
    writer.add_name(f"{field(reader, 'general.name', 'target')} specchat draft")
    writer.add_file_type(file_type(gguf_type))
    writer.add_string(KEY_PREFIX + "target", spec.target)
    writer.add_array(KEY_PREFIX + "target_layers", [int(i) for i in spec.layers])
    if spec.vocab:
        writer.add_array(KEY_PREFIX + "vocab", [int(i) for i in sorted(spec.vocab)])
        writer.add_string(KEY_PREFIX + "outside_vocab_rows", "mean of the vocab rows")


def raw(tensor: Any) -> tuple[np.ndarray, Any]:
    """A reader tensor's stored data and type, to be written unchanged."""
    return np.array(tensor.data), tensor.tensor_type


def own_tensors(state: dict, layers: int, shape: dict, qtype) -> list[tuple]:
    """(gguf name, data, type) of the draft's layers and final norm."""
    out = []
    for name in sorted(k for k in state if not k.endswith(INT8_SCALE)):
        scale = state.get(name + INT8_SCALE)
        rows = state[name].numpy() if scale is not None else state[name].float().numpy()
        scale = None if scale is None else scale.float().numpy()
        heads = rope_heads(name, shape)
        if heads:
            order = rope_row_order(rows.shape[0], heads)
            rows, scale = rows[order], None if scale is None else scale[order]
        gguf_name = llama_cpp_name(name, layers)
        if gguf_name is None:
            raise UsageError(f"draft weight {name} has no llama.cpp name: not a llama draft")
        out.append((gguf_name, *encode(rows, scale, qtype)))
    return out


def llama_cpp_name(hf_name: str, layers: int, arch: str = "llama") -> str | None:
    """llama.cpp's name of a transformers weight or bias, by gguf's own name map
    (model.layers.0.self_attn.q_proj.weight -> blk.0.attn_q.weight); None where it has none."""
    return _name_map(arch, layers).get_name(hf_name, try_suffixes=(".weight", ".bias"))


@functools.lru_cache(maxsize=8)
def _name_map(arch: str, layers: int) -> Any:
    import gguf

    return gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], layers)


def rope_heads(hf_name: str, shape: dict) -> int | None:
    """The head count by which llama.cpp's rope order regroups a weight's rows (Q: the
    `head_count` of `shape`, K: its `head_count_kv`); None for a weight it keeps as it is."""
    return next((shape[key] for suffix, key in PERMUTED.items() if hf_name.endswith(suffix)), None)


def rope_row_order(rows: int, heads: int) -> np.ndarray:
    """Row order convert_hf_to_gguf.py gives Q/K: halves of each head interleaved."""
    index = np.arange(rows)
    return index.reshape(heads, 2, rows // heads // 2).swapaxes(1, 2).reshape(rows)


def encode(rows: np.ndarray, scale: np.ndarray | None, qtype: Any) -> tuple[np.ndarray, Any]:
    """A weight as stored in the file: vectors in F32; matrices in `qtype`."""
    import gguf

    if rows.ndim == 1:
        return rows.astype(np.float32), gguf.GGMLQuantizationType.F32
    if scale is not None and qtype == gguf.GGMLQuantizationType.Q8_0 and fits_float16(scale):
        return q8_0_from_int8(rows, scale), qtype
    values = rows.astype(np.float32) * scale[:, None] if scale is not None else rows
    return encode_float(values.astype(np.float32), qtype), qtype


def encode_float(values: np.ndarray, qtype) -> np.ndarray:
    import gguf

    if qtype == gguf.GGMLQuantizationType.F32:
        return values
    if qtype == gguf.GGMLQuantizationType.F16:
        return values.astype(np.float16)
    return gguf.quants.quantize(values, qtype)


def fits_float16(scale: np.ndarray) -> bool:
    """Every scale is a normal float16 (else rounding it would lose precision)."""
    half = scale.astype(np.float16)
    return bool(np.isfinite(half).all() and (np.abs(half) >= np.finfo(np.float16).tiny).all())


def q8_0_from_int8(rows: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Q8_0 blocks (float16 scale + 32 int8) holding per-row int8 values unchanged."""
    count, width = rows.shape
    blocks = np.empty((count, width // 32, 34), dtype=np.uint8)
    blocks[:, :, :2] = scale.astype(np.float16).view(np.uint8).reshape(count, 1, 2)
    blocks[:, :, 2:] = rows.astype(np.int8).reshape(count, width // 32, 32).view(np.uint8)
    return blocks.reshape(count, -1)


def output_rows(embd, vocab: list[int], qtype) -> np.ndarray:
    """The full-size output of a reduced draft: V rows as embedded, the rest their mean."""
    import gguf

    table = gguf.quants.dequantize(np.array(embd.data), embd.tensor_type).astype(np.float32)
    inside = np.zeros(table.shape[0], dtype=bool)
    inside[vocab] = True
    mean = table[inside].astype(np.float64).mean(axis=0).astype(np.float32)
    if qtype == embd.tensor_type:
        stored = np.array(embd.data)
        stored[~inside] = encode_float(mean[None, :], qtype)[0]
        return stored
    table[~inside] = mean
    return encode_float(table, qtype)


def outside_row_error(path: Path) -> tuple[np.ndarray, float]:
    """(the stored outside-vocabulary row as floats, max |stored - exact mean|) of a file."""
    import gguf

    reader = gguf.GGUFReader(path)
    vocab = np.array(field(reader, KEY_PREFIX + "vocab"), dtype=np.int64)
    output = reader_tensor(reader, "output.weight", path)
    embd = reader_tensor(reader, "token_embd.weight", path)
    rows = gguf.quants.dequantize(np.array(output.data), output.tensor_type)
    table = gguf.quants.dequantize(np.array(embd.data), embd.tensor_type)
    outside = np.setdiff1d(np.arange(rows.shape[0]), vocab)[0]
    exact = table[vocab].astype(np.float64).mean(axis=0)
    return rows[outside], float(np.abs(rows[outside] - exact).max())
