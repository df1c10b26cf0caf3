"""`ollama:NAME[:TAG]` references: the GGUF blob an ollama model pulled on this machine runs from.

ollama keeps models under `~/.ollama/models` (or the folder `OLLAMA_MODELS` names, as ollama
itself reads it): a manifest per model at `manifests/HOST/NAMESPACE/MODEL/TAG` (a JSON
object whose `layers` list one of media type `application/vnd.ollama.image.model`), and
content-addressed blobs at `blobs/sha256-<hex>`. A bare name is `registry.ollama.ai/library/
NAME`, the tag defaults to `latest`, as in ollama's own naming. Reads files only; knows
nothing about GGUF or loading.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from specchat.errors import ModelNotFound

MODEL_LAYER = "application/vnd.ollama.image.model"
DEFAULT_HOST = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"


def models_dir() -> Path:
    """Where ollama keeps its models: OLLAMA_MODELS, else ~/.ollama/models."""
    return Path(os.environ.get("OLLAMA_MODELS") or "~/.ollama/models").expanduser()


def manifest_parts(name: str) -> tuple[str, str, str, str]:
    """(host, namespace, model, tag) of an ollama name: `qwen2.5:1.5b`, `user/model`,
    `host/namespace/model:tag`."""
    has_tag = ":" in name.rsplit("/", 1)[-1]  # a host's port is no tag
    path, tag = name.rsplit(":", 1) if has_tag else (name, DEFAULT_TAG)
    segments = path.split("/")
    if not 1 <= len(segments) <= 3 or not all(segments) or not tag:
        raise ModelNotFound(f"ollama:{name} is not an ollama model name: write ollama:NAME[:TAG], "
                            "e.g. ollama:qwen2.5-coder:1.5b (`ollama list` shows yours)")
    segments = [DEFAULT_HOST, DEFAULT_NAMESPACE][: 3 - len(segments)] + segments
    return segments[0], segments[1], segments[2], tag


def manifest_path(name: str) -> Path:
    host, namespace, model, tag = manifest_parts(name)
    return models_dir() / "manifests" / host / namespace / model / tag


def model_blob(name: str) -> Path:
    """The GGUF blob of ollama model `name`; one-line errors for a model not pulled, a
    manifest without a model layer, or a missing blob."""
    manifest = manifest_path(name)
    if not manifest.is_file():
        raise ModelNotFound(f"ollama:{name} is not pulled on this machine (no manifest "
                            f"{manifest}): run `ollama pull {name}`, or set OLLAMA_MODELS to "
                            "ollama's models folder")
    digest = model_digest(manifest, name)
    blob = models_dir() / "blobs" / digest.replace(":", "-", 1)
    if not blob.is_file():
        raise ModelNotFound(f"ollama:{name}: its model blob {blob} is missing: run "
                            f"`ollama pull {name}` again")
    return blob


def model_digest(manifest: Path, name: str) -> str:
    """The digest ("sha256:...") of the manifest's model layer."""
    try:
        layers = json.loads(manifest.read_text(encoding="utf-8")).get("layers") or []
    except (OSError, ValueError, AttributeError) as error:
        raise ModelNotFound(f"ollama:{name}: its manifest {manifest} cannot be read ({error}): "
                            f"run `ollama pull {name}` again") from None
    digests = [layer.get("digest") for layer in layers
               if isinstance(layer, dict) and layer.get("mediaType") == MODEL_LAYER]
    if not digests or not isinstance(digests[0], str) or not digests[0].startswith("sha256:"):
        raise ModelNotFound(f"ollama:{name}: its manifest {manifest} names no model layer "
                            f"({MODEL_LAYER}): is it an adapter or a projector only?")
    return digests[0]


def availability(name: str) -> tuple[bool, str]:
    try:
        return True, str(model_blob(name))
    except ModelNotFound as error:
        return False, str(error)
