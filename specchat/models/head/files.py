"""A draft head's file: one safetensors file with the head's own weights and what it is for.

Matrices are int8 rows with one float32 scale each (`blocks.int8_rows`: a head ships small,
and on a CPU it drafts on those very rows); vectors and biases are float32; `vocab` holds
the ids of the head's output vocabulary. The header's metadata names the format, the
head's shape, the target it was trained for (its reference and hidden size) and how it was
trained. The target's embedding and output matrix are never stored: the head shares them.

Reading a file that is cut short, spoiled or not a head is a one-line error naming it and
what to do. Knows nothing about training or about any backend.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from specchat.errors import ModelNotFound, damaged
from specchat.models.config.refs import HEAD_FILE, missing_head
from specchat.models.blocks.int8_rows import quantize_rows
from specchat.models.head.header import own_parameters, read_header, vocab_rows
from specchat.models.head.network import HeadNetwork, HeadShape

FORMAT = "specchat-head/1"
VECTORS = ("feature_norm", "embed_norm", "attn_norm", "ffn_norm", "out_norm")
REBUILD = "rebuild it with `specchat distill --head` (docs/distill.md)"


@dataclass
class HeadFile:
    """A head as stored: its network (float weights, from the int8 rows), its vocabulary,
    and the facts in its header."""

    network: HeadNetwork
    vocab: list[int]
    target: str
    """The reference of the target it was trained for."""
    info: dict = field(default_factory=dict)
    """How it was trained (data, steps, held-out acceptance), for people."""
    rows: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    """name -> (int8 rows, float32 scales) of each linear, as stored."""

    @property
    def parameters(self) -> int:
        """The head's own parameters, as stored (a run time may drop its float copies)."""
        rows = sum(stored.numel() for stored, _ in self.rows.values())
        return rows + sum(p.numel() for n, p in self.network.named_parameters()
                          if not n.endswith(".weight") or n.split(".")[0] not in self.rows)


def head_path(folder_or_file: Path) -> Path:
    path = Path(folder_or_file)
    return path / HEAD_FILE if path.is_dir() else path


def save_head(network: HeadNetwork, vocab: list[int], target: str, info: dict,
              path: Path) -> None:
    """Write the head to `path`, atomically (a staging file renamed into place)."""
    from safetensors.torch import save_file

    tensors = {"vocab": torch.tensor(vocab, dtype=torch.int32)}
    for name, linear in network.linears().items():
        rows, scale = quantize_rows(linear.weight.detach().cpu())
        tensors[f"{name}.rows"], tensors[f"{name}.scale"] = rows.contiguous(), scale.contiguous()
        if linear.bias is not None:
            tensors[f"{name}.bias"] = linear.bias.detach().float().cpu().contiguous()
    for name in VECTORS:
        tensors[name] = getattr(network, name).detach().float().cpu().contiguous()
    metadata = {"format": FORMAT, "shape": json.dumps(network.shape.as_dict()), "target": target,
                "info": json.dumps(info)}
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(path.name + ".tmp")
    save_file(tensors, str(staging), metadata=metadata)
    staging.replace(path)


def load_head(path: Path) -> HeadFile:
    """The head in `path` (a file or a folder holding one); a one-line `ModelNotFound` for a
    missing, damaged or foreign file."""
    path = head_path(path)
    if not path.is_file():
        raise ModelNotFound(missing_head(path))
    where = f"cannot load draft head {path}"
    try:
        metadata, tensors = read_file(path)
    except Exception as error:  # OSError, or safetensors' SafetensorError for a bad header
        raise damaged(where, first_line(error)) from None
    if metadata.get("format") != FORMAT:
        raise ModelNotFound(f"{where}: not a specchat draft head (format "
                            f"{metadata.get('format')!r}, expected {FORMAT!r}): {REBUILD}")
    try:
        return head_from(metadata, tensors)
    except (KeyError, ValueError, TypeError, RuntimeError) as error:
        raise damaged(where, f"{type(error).__name__}: {first_line(error)}") from None


@dataclass(frozen=True)
class HeadFacts:
    """A head's size and training record, read from its header (no weights)."""

    shape: HeadShape
    parameters: int
    """The head's own parameters."""
    vocab: int
    """Rows of the target's output matrix it multiplies (its output vocabulary)."""
    info: dict


def head_facts(path: Path) -> HeadFacts:
    """The facts in a head file's header; the one-line errors of `load_head`."""
    path = head_path(path)
    if not path.is_file():
        raise ModelNotFound(missing_head(path))
    where = f"cannot read draft head {path}"
    try:
        metadata, shapes = read_header(path)
        shape = HeadShape(**json.loads(metadata["shape"]))
        info = json.loads(metadata.get("info", "{}"))
    except Exception as error:  # OSError, a bad header
        raise damaged(where, first_line(error)) from None
    return HeadFacts(shape, own_parameters(shapes), vocab_rows(shapes), info)


def read_file(path: Path) -> tuple[dict, dict[str, torch.Tensor]]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
        return metadata, {name: handle.get_tensor(name) for name in handle.keys()}


def head_from(metadata: dict, tensors: dict[str, torch.Tensor]) -> HeadFile:
    shape = HeadShape(**json.loads(metadata["shape"]))
    network = HeadNetwork(shape, initialise=False)  # every value is the file's (below)
    rows = {}
    with torch.no_grad():
        for name, linear in network.linears().items():
            stored, scale = tensors[f"{name}.rows"], tensors[f"{name}.scale"]
            if stored.shape != linear.weight.shape or stored.dtype != torch.int8:
                raise ValueError(f"{name} is {tuple(stored.shape)} {stored.dtype}, the shape "
                                 f"says {tuple(linear.weight.shape)} int8")
            linear.weight.copy_(stored.float() * scale.float()[:, None])
            rows[name] = (stored, scale.float())
            if linear.bias is not None:
                linear.bias.copy_(tensors[f"{name}.bias"])
        for name in VECTORS:
            getattr(network, name).copy_(tensors[name])
    network.eval().requires_grad_(False)
    return HeadFile(network, tensors["vocab"].tolist(), metadata.get("target", ""),
                    json.loads(metadata.get("info", "{}")), rows)


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
