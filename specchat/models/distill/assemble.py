"""Turning a shipped draft (own weights + spec) into a full transformers model folder.

The folder is built once per draft version under the user cache directory:
the target is loaded, the draft is rebuilt from the target's embeddings and the
draft's own weights, and the result is saved with `save_pretrained` together
with the target's tokenizer, so any transformers code (assisted generation
included) can load it. Writes go to a staging folder renamed into place.
Knows nothing about training.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Callable

import torch

from specchat import paths
from specchat.errors import ModelNotFound
from specchat.models.cache_build import build_once, is_built
from specchat.models.distill.draft import (SPEC_FILE, WEIGHTS_FILE, DraftSpec, build_draft,
                                           load_own_weights)



def assembled_folder(shipped: Path) -> Path:
    weights = Path(shipped) / WEIGHTS_FILE
    stat = weights.stat()
    spec_text = (Path(shipped) / SPEC_FILE).read_text()
    key = f"{weights.resolve()}|{stat.st_size}|{int(stat.st_mtime)}|{spec_text}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return paths.cache_dir() / "drafts" / f"{Path(shipped).resolve().name}-{digest}"


def ensure_assembled(shipped: Path, progress: Callable[[str], None] = lambda _: None) -> Path:
    """The full model folder of the draft shipped in `shipped`, built on first use."""
    if not (Path(shipped) / WEIGHTS_FILE).is_file():
        raise ModelNotFound(f"draft folder {shipped} has no {WEIGHTS_FILE} yet: its training run "
                            "has not saved a draft; let `specchat distill` run longer")
    target = assembled_folder(shipped)
    if not is_built(target):
        progress(f"assembling draft {Path(shipped).name} (first use only)")
    build_once(target, lambda staging: write_full_model(Path(shipped), staging, progress),
               f"assembled from {shipped}")
    remove_older_versions(target)
    return target


def remove_older_versions(current: Path) -> None:
    """Drop folders assembled from earlier versions of the same draft (retrained weights)."""
    prefix = current.name.rsplit("-", 1)[0] + "-"
    for folder in current.parent.glob(prefix + "*"):
        if folder != current and folder.name.rsplit("-", 1)[0] + "-" == prefix:
            shutil.rmtree(folder, ignore_errors=True)


def write_full_model(shipped: Path, out: Path, progress: Callable[[str], None]) -> None:
    from specchat.models.loader import load_model
    from specchat.models.refs import parse_ref

    spec = DraftSpec.load(shipped)
    target, tokenizer = load_model(parse_ref(spec.target), torch.float32, "cpu", "none", progress)
    draft = build_draft(target, spec.layers)
    load_own_weights(draft, shipped)
    draft.save_pretrained(out)
    tokenizer.save_pretrained(out)
    shutil.copy(shipped / SPEC_FILE, out / SPEC_FILE)
