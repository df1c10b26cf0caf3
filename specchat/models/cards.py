"""What a model on disk is, read without loading it: the facts `pairs --suggest` ranks drafts
by (its tokenizer's digest, its family, its size).

A GGUF file is read from its header (models/gguf/header.py: the architecture, the names,
the token texts for the tokenizer digest of models/vocabulary.py) and its size on disk;
a transformers folder from config.json, tokenizer.json and its safetensors files' sizes.
Each card is remembered per file in the cache (models/gguf/cache.py's `remembered`, keyed
by path, size and modification time), so a second scan reads no header again.

The family is a heuristic: the first word of the model's own name (`general.basename`, a
repository's name), an organisation's prefix left out ("Meta-Llama-3.1" is a llama).
Weights are what decoding reads every step, so their bytes set a draft's cost against its
target's (the size ratio). Knows nothing about backends or loading.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from specchat.errors import DamagedWeights, ModelNotFound, SpecchatError

ORGANISATIONS = {"meta", "hf", "huggingfacetb", "mistralai", "google", "microsoft", "qwen",
                 "thebloke", "bartowski", "unsloth", "lmstudio", "community", "models"}
"""Leading words of a model's name that name who published it, not what it is (a word of a
model name, such as "qwen" in "qwen2.5", is kept where it is the model's own first word)."""
NOT_CAUSAL = {"clip", "bert", "nomic-bert", "jina-bert-v2", "t5", "t5encoder", "whisper",
              "wavtokenizer-dec"}
"""Architectures that do not generate text token by token: never a draft."""


@dataclass(frozen=True)
class ModelCard:
    """One model on disk, as `pairs --suggest` sees it."""

    ref: str
    path: str
    source: str
    """"catalog", "builtin", "ollama", "hf-cache", "lm-studio" or "given"."""
    architecture: str
    name: str
    family: str
    weight_bytes: int
    size_label: str
    tokenizer: str
    """The core digest of its tokenizer (models/vocabulary.py); "" where unknown."""
    vocabulary: int
    kind: str = "model"
    """The file's `general.type`: "model"; "mmproj" or "adapter" are no model of their own;
    "head": a draft head (`head_card`), which drafts for one target only."""

    @property
    def generates(self) -> bool:
        """Whether it can draft: a model of its own that writes text token by token."""
        return self.kind == "model" and self.architecture not in NOT_CAUSAL

    def as_dict(self) -> dict:
        return asdict(self)


def family_of(name: str) -> str:
    """The family word of a model name: "Qwen2.5-Coder" -> "qwen", "SmolLM2" -> "smollm"."""
    words = [w for w in re.split(r"[^a-z]+", name.lower()) if w]
    while len(words) > 1 and words[0] in ORGANISATIONS and words[1] not in ORGANISATIONS:
        words = words[1:]
    return words[0] if words else ""


def gguf_card(path: Path, ref: str, source: str) -> ModelCard:
    """A GGUF file's card (remembered per file). `SpecchatError` where it cannot be read."""
    from specchat.models.gguf.cache import remembered

    facts = json.loads(remembered(path, "card", lambda: json.dumps(gguf_facts(path))))
    return ModelCard(ref, str(path), source, **facts)


def gguf_facts(path: Path) -> dict:
    from specchat.models.gguf.header import TOKENS, read_metadata, text
    from specchat.models.vocabulary import core_digest

    try:
        metadata = read_metadata(path, frozenset({TOKENS}))
    except (OSError, ValueError, DamagedWeights) as error:
        raise SpecchatError(f"{path}: not a readable GGUF file ({error})") from None
    tokens = metadata.get(TOKENS) or []
    architecture = text(metadata, "general.architecture", "unknown")
    name = text(metadata, "general.basename") or text(metadata, "general.name") or path.stem
    return {"architecture": architecture, "name": name, "family": family_of(name),
            "weight_bytes": path.stat().st_size,
            "size_label": text(metadata, "general.size_label"),
            "tokenizer": core_digest(enumerate(tokens)) if tokens else "",
            "vocabulary": len(tokens), "kind": text(metadata, "general.type", "model")}


def folder_card(folder: Path, ref: str, source: str) -> ModelCard:
    """A transformers folder's card (remembered per folder). `SpecchatError` where its
    config.json cannot be read."""
    from specchat.models.gguf.cache import remembered

    facts = json.loads(remembered(folder / "config.json", "card",
                                  lambda: json.dumps(folder_facts(folder))))
    return ModelCard(ref, str(folder), source, **facts)


def folder_facts(folder: Path) -> dict:
    from specchat.models.device.estimate import model_size, params_label
    from specchat.models.vocabulary import tokenizer_json_digest

    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise SpecchatError(f"{folder}: its config.json cannot be read ({error})") from None
    try:
        digest = tokenizer_json_digest(folder / "tokenizer.json")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        digest = ""
    name = str(config.get("_name_or_path") or "").rstrip("/").split("/")[-1] or folder_name(folder)
    size = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
    counted = model_size(folder)
    return {"architecture": str(config.get("model_type") or "unknown"), "name": name,
            "family": family_of(name), "weight_bytes": size,
            "size_label": params_label(counted.parameters) if counted else "",
            "tokenizer": digest, "vocabulary": int(config.get("vocab_size") or 0)}


def folder_name(folder: Path) -> str:
    """A folder's model name: an HF cache snapshot's repository, else the folder's own."""
    for parent in folder.parents:
        if parent.name.startswith("models--"):
            return parent.name.split("--")[-1]
    return folder.name


def card_for_ref(ref: str, source: str) -> ModelCard:
    """The card of a model reference, from what is on this machine only: `SpecchatError`
    where it is not here (never downloaded, a built-in not joined yet) or cannot be read."""
    from specchat.models.config.refs import (availability, builtin_draft, gguf_path, head_file,
                                             parse_ref)

    parsed = parse_ref(ref)
    if parsed.kind == "ngram":
        raise SpecchatError("ngram is a lookup, not a model")
    if head_file(parsed) is not None:
        raise SpecchatError(f"{ref} is a draft head: it drafts only for the target it read")
    available, where = availability(parsed)
    if not available or "on first use" in where:
        raise SpecchatError(f"{ref}: not on this machine as a file yet ({where})")
    folder = builtin_draft(parsed.value) if parsed.kind == "builtin" else None
    if folder is not None:
        return distilled_card(ref, folder, source)
    path = gguf_path(parsed)
    if path is not None:
        return gguf_card(path, ref, source)
    return folder_card(Path(where), ref, source)


def head_card(ref: str, path: Path, source: str, target: ModelCard) -> ModelCard | None:
    """The card of the draft head at `path` where it was trained for `target` (its recorded
    target is that file), else None: a head drafts only for the target it read. Its size is
    what it holds beside an int8 target (its rows and its copy of the output rows).
    `ModelNotFound` for a file that is no readable head."""
    import dataclasses

    from specchat.models.head.header import head_summary

    try:
        summary = head_summary(path)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ModelNotFound(f"{path}: not a readable draft head ({error})") from None
    try:
        trained_for = card_for_ref(summary.target, source)
    except SpecchatError:  # its target is not on this machine: not this one
        return None
    if trained_for.path != target.path:
        return None
    return dataclasses.replace(target, ref=ref, path=str(path), source=source,
                               architecture="draft head", name=path.parent.name,
                               weight_bytes=summary.weight_bytes,
                               size_label=f"{summary.parameters / 1e6:.1f}M", kind="head")


def distilled_card(ref: str, folder: Path, source: str) -> ModelCard:
    """A `specchat distill` draft: its target's tokenizer and family, its own weights."""
    import dataclasses

    target = json.loads((folder / "specchat-draft.json").read_text())["target"]
    card = card_for_ref(target, source)
    size = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
    return dataclasses.replace(card, ref=ref, path=str(folder), name=folder.name,
                               weight_bytes=size, size_label="")
