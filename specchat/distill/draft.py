"""A draft built from its target: a few of the target's layers, its embeddings, its head.

The draft is a standard transformers model of the target's architecture with
fewer layers. Its layers start as copies of chosen target layers; its token
embeddings (and, tied to them, its output head) are the target's and stay
frozen. What is the draft's own, and therefore all that ships, is the layers
and the final norm (`draft.safetensors`) plus `specchat-draft.json`, which
names the target, the layers copied, and the optional reduced output
vocabulary (the format, and rebuilding the full transformers folder from those
parts and the target, are specchat.models.torch_backend.shipped_draft's). The weights ship in bfloat16, or in int8 with
one scale per output row when a deeper draft must stay small. A draft can grow
from an earlier, smaller one: layers copied from the same target layer keep
their trained weights, new ones enter as the identity (zeroed output
projections), so the grown draft starts exactly where the old one was.
Knows nothing about training data.
"""

from __future__ import annotations

from pathlib import Path

import torch

from specchat.errors import UsageError
from specchat.models.blocks.int8_rows import quantize_rows
from specchat.models.torch_backend.shipped_draft import (INT8_SCALE, SHARED_PREFIXES, SPEC_FILE, WEIGHTS_FILE,
                                           DraftSpec, is_draft_folder, own_state, read_own_weights)

OUTPUT_PROJECTIONS = ("self_attn.o_proj.", "mlp.down_proj.")
"""What a layer writes into the residual stream through; zeroed, the layer is the identity."""


def pick_layers(total: int, count: int) -> list[int]:
    """The first count-1 target layers and the last one.

    Early layers read the raw token embeddings, which is what the draft's first
    layer reads too; the last layer writes into the space the final norm and the
    tied head read. The layers in between are the ones a draft can skip.
    """
    if not 1 <= count <= total:
        raise UsageError(f"--layers {count} is out of range: the target has {total} layers "
                         f"(pick 1 to {total})")
    return list(range(count - 1)) + [total - 1]


def trainable_parameters(draft) -> list[torch.nn.Parameter]:
    """Layers and final norm train; the shared embeddings (and tied head) stay frozen."""
    draft.model.embed_tokens.weight.requires_grad_(False)
    return [p for name, p in draft.named_parameters() if not name.startswith(SHARED_PREFIXES)]


def save_shipped(draft, spec: DraftSpec, folder: Path, int8: bool = False) -> None:
    """Write the shippable part (own weights + spec) into `folder`, atomically per file."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().float().contiguous().cpu() for k, v in own_state(draft).items()}
    state = quantize_int8(state) if int8 else {k: v.to(torch.bfloat16) for k, v in state.items()}
    staging = folder / (WEIGHTS_FILE + ".tmp")
    save_file(state, str(staging))
    staging.replace(folder / WEIGHTS_FILE)
    spec.save(folder)


def quantize_int8(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Matrices as int8 with one float scale per row (absmax / 127); vectors in bfloat16."""
    out = {}
    for name, tensor in state.items():
        if tensor.dim() != 2:
            out[name] = tensor.to(torch.bfloat16)
            continue
        out[name], out[name + INT8_SCALE] = quantize_rows(tensor)
    return out


def grow_from(draft, layers: list[int], earlier: Path, target_ref: str) -> list[int]:
    """Start `draft` (copies of target `layers`) from the earlier draft in `earlier`.

    Each layer copied from a target layer the earlier draft also copied takes that
    layer's trained weights, and the final norm is the earlier draft's; every other
    layer gets zeroed output projections, so it adds nothing to the residual stream
    until training moves it, and the grown draft computes what the earlier one did.
    Returns the indices of the new (identity) layers.
    """
    old = check_growable(earlier, target_ref)
    state = read_own_weights(earlier)
    fresh = []
    with torch.no_grad():
        own = draft.state_dict()
        for mine, target_layer in enumerate(layers):
            prefix = f"model.layers.{mine}."
            if target_layer in old.layers:
                source = f"model.layers.{old.layers.index(target_layer)}."
                for name in own:
                    if name.startswith(prefix):
                        own[name].copy_(state[source + name[len(prefix):]])
                continue
            fresh.append(mine)
            zero_output_projections(draft, prefix)
        for name in own:
            if name.startswith("model.norm."):
                own[name].copy_(state[name])
    return fresh


def check_growable(earlier: Path, target_ref: str) -> DraftSpec:
    """The earlier draft's spec, if it is a draft of the same target; else a usage error."""
    if not is_draft_folder(earlier):
        raise UsageError(f"--init-from {earlier} is not a draft folder (it needs {SPEC_FILE} and "
                         f"{WEIGHTS_FILE}): point it at a `specchat distill --out` folder")
    spec = DraftSpec.load(earlier)
    if spec.target != target_ref:
        raise UsageError(f"--init-from {earlier} is a draft for {spec.target}, not {target_ref}: "
                         "grow only from a draft of the same target")
    return spec


def zero_output_projections(draft, prefix: str) -> None:
    hits = [t for name, t in draft.state_dict().items()
            if name.startswith(prefix) and name[len(prefix):].startswith(OUTPUT_PROJECTIONS)]
    if not hits:
        raise UsageError(f"--init-from: the draft's layers have no {' or '.join(OUTPUT_PROJECTIONS)} "
                         "to zero, so this architecture cannot grow a draft; train without --init-from")
    for tensor in hits:
        tensor.zero_()
