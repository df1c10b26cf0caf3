"""Where users keep models, and what is there: for `pairs --suggest`.

Read where each tool documents it keeps its models, each root once:
- ollama: `OLLAMA_MODELS`, else `~/.ollama/models` and, for the Linux service,
  `/usr/share/ollama/.ollama/models`; a manifest per model (`manifests/HOST/NAMESPACE/
  MODEL/TAG`) names its GGUF blob (models/config/ollama.py reads one the same way);
- the Hugging Face cache (`HF_HUB_CACHE`, `HF_HOME`/hub, `~/.cache/huggingface/hub`: the
  hub module's `cache_dir`): each repository's snapshot (its `refs/main`, else the newest),
  with its GGUF files and, where it has config.json and safetensors, the model folder;
- LM Studio: `~/.lmstudio/models`, `~/.cache/lm-studio/models`, and the home folder named
  in `~/.lmstudio-home-pointer` (its `models`), each `PUBLISHER/MODEL/FILE.gguf`.
Each model is a `Found`: the reference models.toml would take, and its file or folder.
What cannot be read (a folder without permission, a corrupt manifest, a missing blob) is a
one-line note and the scan goes on. Reads directories and small files only; never the
network, never a model's weights.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from specchat.models.config.ollama import DEFAULT_HOST, DEFAULT_NAMESPACE, MODEL_LAYER

OLLAMA_SERVICE_MODELS = Path("/usr/share/ollama/.ollama/models")
LMSTUDIO_FOLDERS = (".lmstudio/models", ".cache/lm-studio/models")
LMSTUDIO_POINTER = ".lmstudio-home-pointer"
DEEPEST = 6
"""Folder levels a GGUF file is looked for below an LM Studio root or an HF snapshot."""


@dataclass(frozen=True)
class Found:
    """A model found on disk."""

    ref: str
    """As models.toml names it: `ollama:NAME:TAG`, `hf:OWNER/REPO[/FILE.gguf]`, a path."""
    path: Path
    source: str
    """"ollama", "hf-cache" or "lm-studio"."""


@dataclass
class Scan:
    """What a scan found, and what it could not read."""

    found: list[Found]
    notes: list[str]
    roots: dict[str, list[str]]
    """Per source, the folders looked in (whether they exist or not)."""


def ollama_roots() -> list[Path]:
    given = os.environ.get("OLLAMA_MODELS")
    if given:
        return [Path(given).expanduser()]
    return [Path("~/.ollama/models").expanduser(), OLLAMA_SERVICE_MODELS]


def hf_roots() -> list[Path]:
    from specchat.models.config.hub import cache_dir

    return [cache_dir()]


def lmstudio_roots(home: Path | None = None) -> list[Path]:
    home = home or Path.home()
    roots = [home / folder for folder in LMSTUDIO_FOLDERS]
    pointer = home / LMSTUDIO_POINTER
    try:
        named = pointer.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        named = ""
    if named:
        roots.append(Path(named).expanduser() / "models")
    return list(dict.fromkeys(roots))


def scan() -> Scan:
    """Every model in every store (module docstring)."""
    result = Scan([], [], {})
    for source, roots, reader in (("ollama", ollama_roots(), ollama_models),
                                  ("hf-cache", hf_roots(), hf_models),
                                  ("lm-studio", lmstudio_roots(), lmstudio_models)):
        result.roots[source] = [str(root) for root in roots]
        for root in roots:
            if root.is_dir():
                reader(root, result)
    return result


def ollama_models(root: Path, result: Scan) -> None:
    manifests = root / "manifests"
    for manifest in walk_files(manifests, 4, result):
        parts = manifest.relative_to(manifests).parts
        if len(parts) != 4:
            continue
        blob = ollama_blob(root, manifest, result)
        if blob is not None:
            result.found.append(Found(f"ollama:{ollama_name(*parts)}", blob, "ollama"))


def ollama_name(host: str, namespace: str, model: str, tag: str) -> str:
    """The name `ollama list` shows: the default host and namespace left out."""
    if host == DEFAULT_HOST and namespace == DEFAULT_NAMESPACE:
        return f"{model}:{tag}"
    if host == DEFAULT_HOST:
        return f"{namespace}/{model}:{tag}"
    return f"{host}/{namespace}/{model}:{tag}"


def ollama_blob(root: Path, manifest: Path, result: Scan) -> Path | None:
    """The model blob a manifest names (None, with a note, where it cannot be had)."""
    try:
        layers = json.loads(manifest.read_text(encoding="utf-8")).get("layers") or []
        digest = next(layer["digest"] for layer in layers
                      if isinstance(layer, dict) and layer.get("mediaType") == MODEL_LAYER)
    except StopIteration:
        return None  # an adapter or a projector: no model of its own
    except (OSError, ValueError, AttributeError, KeyError, TypeError) as error:
        result.notes.append(f"ollama manifest {manifest} cannot be read ({first_line(error)}): "
                            "skipped")
        return None
    blob = root / "blobs" / str(digest).replace(":", "-", 1)
    if not blob.is_file():
        result.notes.append(f"ollama manifest {manifest} names blob {blob.name}, which is "
                            "missing: skipped")
        return None
    return blob


def hf_models(root: Path, result: Scan) -> None:
    for repo in sorted(listed(root, result)):
        if not (repo.name.startswith("models--") and repo.is_dir()):
            continue
        snapshot = hf_snapshot(repo)
        if snapshot is None:
            continue
        name = repo.name.removeprefix("models--").replace("--", "/", 1)
        for gguf in walk_files(snapshot, DEEPEST, result, ".gguf"):
            relative = gguf.relative_to(snapshot).as_posix()
            result.found.append(Found(f"hf:{name}/{relative}", gguf, "hf-cache"))
        if (snapshot / "config.json").is_file() and any(snapshot.glob("*.safetensors")):
            result.found.append(Found(f"hf:{name}", snapshot, "hf-cache"))


def hf_snapshot(repo: Path) -> Path | None:
    """The revision `refs/main` names, else the newest snapshot."""
    try:
        revision = (repo / "refs" / "main").read_text().strip()
        if (repo / "snapshots" / revision).is_dir():
            return repo / "snapshots" / revision
    except OSError:
        pass
    snapshots = [p for p in (repo / "snapshots").glob("*") if p.is_dir()]
    return max(snapshots, key=lambda p: p.stat().st_mtime, default=None)


def lmstudio_models(root: Path, result: Scan) -> None:
    for gguf in walk_files(root, DEEPEST, result, ".gguf"):
        result.found.append(Found(str(gguf), gguf, "lm-studio"))


def walk_files(root: Path, depth: int, result: Scan, suffix: str = "") -> Iterator[Path]:
    """Files under `root` down to `depth` levels (ending in `suffix`), in name order; a
    folder that cannot be listed is a note."""
    for entry in sorted(listed(root, result)):
        if entry.is_dir() and depth > 1:
            yield from walk_files(entry, depth - 1, result, suffix)
        elif entry.is_file() and entry.name.lower().endswith(suffix):
            yield entry


def listed(folder: Path, result: Scan) -> list[Path]:
    try:
        return list(folder.iterdir())
    except FileNotFoundError:
        return []
    except OSError as error:
        result.notes.append(f"cannot read {folder} ({error.strerror or error}): skipped")
        return []


def first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0][:160] if lines else type(error).__name__
