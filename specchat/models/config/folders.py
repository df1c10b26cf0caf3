"""What a local model folder must hold for specchat to load it, checked by file names before
anything loads: one check for `specchat pairs` (whether a model is available offline) and
the loader (models/weights.py), so that a folder the list calls available loads, and one
that cannot load says what is missing and what to do, in one line. (An empty folder, `/`
and a folder without tokenizer files were listed as available; transformers' own message
for a missing tokenizer stopped mid-sentence at "from one of:".)

A transformers folder needs config.json, weights (safetensors or PyTorch .bin, whole or
sharded with an index) and a tokenizer: tokenizer.json, vocab.json with merges.txt, or a
SentencePiece tokenizer.model where the sentencepiece package is installed. A
`specchat distill` draft (specchat-draft.json, no config.json) is a draft folder instead,
available when its target is (models/config/refs.py). Loads nothing; knows file names only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
           "pytorch_model.bin.index.json")
"""Weights files transformers loads a model from (an index names the shards)."""
SAVED_WITH = "point models.toml at a folder saved with save_pretrained"


def is_draft_folder(folder: Path) -> bool:
    """A `specchat distill` output: its own weights and spec, no full model of its own."""
    return (folder / "specchat-draft.json").is_file() and not (folder / "config.json").is_file()


def has_tokenizer(folder: Path) -> bool:
    """Whether transformers can build a tokenizer from the folder's files."""
    if (folder / "tokenizer.json").is_file():
        return True
    if (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
        return True
    spm = importlib.util.find_spec("sentencepiece") is not None
    return spm and (folder / "tokenizer.model").is_file()


def folder_problem(folder: Path) -> str | None:
    """Why `folder` cannot be loaded as a transformers model (one line: what is missing and
    what to do), or None when it holds what loading needs."""
    if not folder.is_dir():
        return f"model folder {folder} does not exist: check the path in models.toml"
    if not (folder / "config.json").is_file():
        return f"model folder {folder} has no config.json: {SAVED_WITH}"
    if not any((folder / name).is_file() for name in WEIGHTS):
        return (f"model folder {folder} has no weights (model.safetensors or pytorch_model.bin, "
                f"or their index): {SAVED_WITH}")
    if not has_tokenizer(folder):
        spm = ("; its tokenizer.model needs `pip install sentencepiece`"
               if (folder / "tokenizer.model").is_file() else "")
        return (f"model folder {folder} has no tokenizer files (tokenizer.json, or vocab.json "
                f"and merges.txt){spm}: save the model's tokenizer there too "
                "(tokenizer.save_pretrained)")
    return None
