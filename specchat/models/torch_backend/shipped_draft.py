"""A shipped draft (what `specchat distill` writes): its own weights (the layers and
final norm, bfloat16 or int8 with a scale per row) and `specchat-draft.json`
(the target, the layers copied, the reduced output vocabulary); and turning it
into a full transformers model folder.

The full folder is built once per draft version under the user cache directory:
the target is loaded, the draft is rebuilt from the target's embeddings and the
draft's own weights, and the result is saved with `save_pretrained` together
with the target's tokenizer, so any transformers code (assisted generation
included) can load it. Writes go to a staging folder renamed into place; an earlier
version's folder goes when the next is built (cache_build.py).
Knows nothing about training (specchat.distill does that, and imports this).
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch

from specchat import paths
from specchat.errors import ModelNotFound, UsageError
from specchat.models.config.cache_build import build_once, is_built

SPEC_FILE = "specchat-draft.json"
WEIGHTS_FILE = "draft.safetensors"
SHARED_PREFIXES = ("model.embed_tokens.", "lm_head.")
INT8_SCALE = ".int8_scale"
"""Suffix of the per-row scale stored next to an int8 weight."""


@dataclass
class DraftSpec:
    """What a shipped draft needs besides its weights."""

    target: str
    """The target's model reference, as given to `specchat distill --target`."""
    layers: list[int]
    """Target layer each draft layer was initialised from, in order."""
    vocab: list[int] | None = None
    """Token ids the draft may propose (its reduced output vocabulary); None: all."""
    info: dict = field(default_factory=dict)
    """How it was trained (command, seed, tokens, held-out acceptance), for people."""

    def save(self, folder: Path) -> None:
        """Readable JSON with the (long) vocabulary on one line."""
        data = asdict(self)
        vocab = json.dumps(data.pop("vocab"))
        text = json.dumps(data, indent=1)
        (folder / SPEC_FILE).write_text(f'{text[:-2]},\n "vocab": {vocab}\n}}\n')

    @classmethod
    def load(cls, folder: Path) -> "DraftSpec":
        return cls(**json.loads((Path(folder) / SPEC_FILE).read_text()))


def is_draft_folder(folder: Path) -> bool:
    return (Path(folder) / SPEC_FILE).is_file() and (Path(folder) / WEIGHTS_FILE).is_file()


def draft_config(target_config, layers: list[int]):
    config = copy.deepcopy(target_config)
    config.num_hidden_layers = len(layers)
    if getattr(config, "layer_types", None):
        config.layer_types = [config.layer_types[i] for i in layers]
    config.tie_word_embeddings = True
    return config


def build_draft(target_model, layers: list[int]):
    """A new draft model whose layers are copies of `layers` of `target_model`."""
    from transformers import AutoModelForCausalLM

    config = draft_config(target_model.config, layers)
    draft = AutoModelForCausalLM.from_config(config, dtype=target_model.dtype)
    source = target_model.model
    with torch.no_grad():
        draft.model.embed_tokens.weight.copy_(source.embed_tokens.weight)
        draft.model.norm.load_state_dict(source.norm.state_dict())
        for mine, theirs in zip(draft.model.layers, layers):
            mine.load_state_dict(source.layers[theirs].state_dict())
    draft.tie_weights()
    return draft.eval()


def own_state(draft) -> dict[str, torch.Tensor]:
    """The draft's own weights: everything but the shared embeddings and head."""
    return {name: tensor for name, tensor in draft.state_dict().items()
            if not name.startswith(SHARED_PREFIXES)}


def dequantize(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Undo `quantize_int8` (a bfloat16 file passes through unchanged)."""
    return {name: tensor.float() * state[name + INT8_SCALE][:, None] if name + INT8_SCALE in state
            else tensor for name, tensor in state.items() if not name.endswith(INT8_SCALE)}


def read_own_weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return dequantize(load_file(str(Path(folder) / WEIGHTS_FILE)))


def load_own_weights(draft, folder: Path) -> None:
    state = read_own_weights(folder)
    missing = set(own_state(draft)) - set(state)
    if missing:
        raise UsageError(f"draft weights in {folder} lack {sorted(missing)[0]}: "
                         "the folder is not a complete `specchat distill` output")
    with torch.no_grad():
        for name, tensor in draft.state_dict().items():
            if name in state:
                tensor.copy_(state[name].to(tensor.dtype))


def assembled_folder(shipped: Path) -> Path:
    weights = Path(shipped) / WEIGHTS_FILE
    stat = weights.stat()
    spec_text = (Path(shipped) / SPEC_FILE).read_text()
    key = f"{weights.resolve()}|{stat.st_size}|{int(stat.st_mtime)}|{spec_text}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return paths.cache_dir() / "drafts" / f"{Path(shipped).resolve().name}-{digest}"


Progress = Callable[[str], None]
LoadTarget = Callable[[str, Progress], tuple]
"""(target reference, progress) -> (float32 CPU transformers model, tokenizer): the loader's."""


def ensure_assembled(shipped: Path, load_target: LoadTarget,
                     progress: Progress = lambda _: None) -> Path:
    """The full model folder of the draft shipped in `shipped`, built on first use with the
    target that `load_target` loads (passed in by the loader, which imports this module)."""
    if not (Path(shipped) / WEIGHTS_FILE).is_file():
        raise ModelNotFound(f"draft folder {shipped} has no {WEIGHTS_FILE} yet: its training run "
                            "has not saved a draft; let `specchat distill` run longer")
    target = assembled_folder(shipped)
    if not is_built(target):
        progress(f"assembling draft {Path(shipped).name} (first use only)")
    build_once(target, lambda staging: write_full_model(Path(shipped), staging, load_target,
                                                        progress),
               f"assembled from {shipped}", [Path(shipped) / WEIGHTS_FILE, Path(shipped) / SPEC_FILE])
    return target


def write_full_model(shipped: Path, out: Path, load_target: LoadTarget, progress: Progress) -> None:
    spec = DraftSpec.load(shipped)
    target, tokenizer = load_target(spec.target, progress)
    draft = build_draft(target, spec.layers)
    load_own_weights(draft, shipped)
    draft.save_pretrained(out)
    tokenizer.save_pretrained(out)
    shutil.copy(shipped / SPEC_FILE, out / SPEC_FILE)
