"""A draft head on each backend that hands it the target's features: the int8 backend (its
linears on the head's stored int8 rows through the int8 kernels, the target's embedding rows
and output rows of the head's vocabulary) and torch (float copies in the target's dtype on
its device). Outside every room of specchat/models/: it composes the head room with a
backend's, as the backend objects do (backend_int8.py and backend_torch.py call it).
Knows nothing about decoding or training.
"""

from __future__ import annotations

from pathlib import Path

import torch

from specchat.models.backend import LoadedModel
from specchat.models.head.attach import check_fits, label
from specchat.models.head.files import HeadFile, load_head
from specchat.models.head.runtime import HeadRuntime


def loaded_head(runtime: HeadRuntime, head: HeadFile, target: LoadedModel,
                weights: str) -> LoadedModel:
    return LoadedModel(runtime, target.logit_columns, device=target.device, weights=weights,
                       weights_why="a draft head's own weights",
                       options={"head": True, "label": label(head, weights),
                                "info": head.info})


def int8_head(path: Path, pair_name: str, model, tensors: dict[str, torch.Tensor],
              reduce_range: bool) -> tuple[HeadRuntime, HeadFile]:
    """A head drafting beside an `Int8Model` target on its int8 rows: its linears on its own
    stored rows, the target's embedding rows, and the target's output rows of its vocabulary
    (`tensors`: the target's int8 conversion)."""
    from specchat.models.int8.linear import FlatLinear
    from specchat.models.int8.model import head_linear

    head = load_head(path)
    check_fits(head, pair_name, model.arch.hidden, model.arch.vocab, path)
    network = head.network
    for name, linear in network.linears().items():
        rows, scale = head.rows[name]
        bias = None if linear.bias is None else linear.bias.detach().clone()
        network.kernels[name] = FlatLinear(rows, scale, bias, reduce_range)
        linear.weight.data = torch.empty(0)  # drafting multiplies the int8 rows only
    output = head_linear(tensors, torch.tensor(sorted(head.vocab)), reduce_range)
    rows, scale = model.embed_rows, model.embed_scale

    def embed(ids: torch.Tensor) -> torch.Tensor:
        return rows[ids].float() * scale[ids].unsqueeze(1)

    return HeadRuntime(network, head.vocab, model.arch.vocab, embed, output,
                       output_bytes=output.weight_bytes), head


def torch_head(path: Path, pair_name: str, model, device: str,
               dtype: torch.dtype) -> tuple[HeadRuntime, HeadFile]:
    """A head drafting beside a transformers target, in its dtype on its device."""
    head = load_head(path)
    embedding = model.get_input_embeddings()
    output_rows = model.get_output_embeddings().weight
    check_fits(head, pair_name, int(embedding.weight.shape[1]), int(output_rows.shape[0]), path)
    network = head.network.to(device=device, dtype=dtype)
    vocab = torch.tensor(sorted(head.vocab), device=output_rows.device)
    weight = output_rows.detach().index_select(0, vocab).to(device=device, dtype=dtype)

    def embed(ids: torch.Tensor) -> torch.Tensor:
        return embedding(ids.to(embedding.weight.device)).to(device)

    def output(guess: torch.Tensor) -> torch.Tensor:
        return guess @ weight.T

    return HeadRuntime(network, head.vocab, int(output_rows.shape[0]), embed, output, device,
                       dtype, output_bytes=weight.numel() * weight.element_size()), head
