"""Drafts as GGUF files: the export's input checks, and drafts' files built on first use.

`export_draft` checks what a user hands `specchat export-gguf` (a draft folder,
its target) and writes the file (models/gguf/export.py). `ensure_draft_gguf`
builds the GGUF form of a draft folder once under the user cache, keyed by the
draft's files, the target file and the encoding, the way assembled drafts are
built (`builtin:smollm2-135m-draft.gguf` is the shipped draft's). `gguf_file`
says which GGUF file a model reference names, for a backend that runs GGUF
files. Loads no model.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

from specchat import paths
from specchat.errors import ModelNotFound, PairError, UsageError
from specchat.models.config.cache_build import build_once, is_built
from specchat.models.torch_backend.shipped_draft import SPEC_FILE, WEIGHTS_FILE, DraftSpec, is_draft_folder
from specchat.models.config.refs import (ModelRef, builtin_draft, builtin_draft_gguf, builtin_gguf,
                                         gguf_path, parse_ref)

Progress = Callable[[str], None]
FORMAT = "1"
"""Version of the export's layout: a change rebuilds every cached file."""
DEFAULT_TYPE = "q8_0"


def check_draft(folder: Path) -> DraftSpec:
    """The spec of a `specchat distill` output folder, or a one-line error."""
    if not Path(folder).is_dir():
        raise ModelNotFound(f"draft folder {folder} does not exist: pass a `specchat distill --out` "
                            "folder")
    if not is_draft_folder(Path(folder)):
        raise UsageError(f"{folder} is not a draft folder (it needs {SPEC_FILE} and {WEIGHTS_FILE}): "
                         "pass a `specchat distill --out` folder")
    return DraftSpec.load(Path(folder))


def target_file(spec: DraftSpec, folder: Path, given: str | None = None) -> Path:
    """The GGUF file of the draft's target; `given` must name that same file."""
    path = gguf_target(spec.target, f"draft {folder}")
    if given is not None and not same_file(parse_ref(given), path):
        raise PairError(f"draft {folder} was trained for {spec.target}, not {given}: "
                        f"export it with --target {spec.target} (or leave --target out)")
    if not path.is_file():
        raise ModelNotFound(f"target GGUF file {path} of draft {folder} does not exist: "
                            "put the target file back where the draft was trained")
    return path


def gguf_target(target: str, context: str) -> Path:
    """The GGUF file a draft's target reference names; a usage error for any other target."""
    ref = parse_ref(target)
    if ref.kind == "gguf":
        return Path(ref.value)  # checked by the caller, which names the draft
    path = gguf_path(ref) if not is_shipped_draft_ref(ref) else None
    if path is not None:
        return path
    raise UsageError(f"{context}: target {target} is not a GGUF file, and a GGUF draft needs its "
                     "target's GGUF (tokenizer, embeddings); train the draft against a .gguf target")


def check_out(out: Path) -> None:
    if Path(out).suffix.lower() != ".gguf":
        raise UsageError(f"--out {out} must end in .gguf")


def same_file(ref: ModelRef, path: Path) -> bool:
    if ref.kind == "gguf":
        return Path(ref.value).resolve() == path.resolve()
    named = gguf_path(ref) if not is_shipped_draft_ref(ref) else None
    return named is not None and named.resolve() == path.resolve()


def is_shipped_draft_ref(ref: ModelRef) -> bool:
    """`builtin:<draft>` or `builtin:<draft>.gguf`: a draft, never a draft's target."""
    return ref.kind == "builtin" and (builtin_draft(ref.value) is not None
                                      or builtin_draft_gguf(ref.value) is not None)


def export_draft(folder: Path, out: Path, target: str | None = None,
                 gguf_type: str = DEFAULT_TYPE):
    """Check the inputs, then write the draft in `folder` as the GGUF file `out`."""
    from specchat.models.gguf.export import ggml_type, write_draft_gguf

    ggml_type(gguf_type)
    check_out(out)
    spec = check_draft(Path(folder))
    path = target_file(spec, Path(folder), target)
    try:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        return write_draft_gguf(Path(folder), spec, path, Path(out), gguf_type)
    except PermissionError as error:
        raise UsageError(f"cannot write {out} ({error.strerror}): pick another --out") from None


def draft_sources(folder: Path) -> list[Path]:
    """The files the GGUF form of the draft in `folder` is made from: its weights, its spec
    and its target's file (cached_path's key, and what the cache entry records)."""
    folder = Path(folder).resolve()
    return [folder / WEIGHTS_FILE, folder / SPEC_FILE, target_file(DraftSpec.load(folder), folder)]


def cached_path(folder: Path, sources: list[Path], gguf_type: str = DEFAULT_TYPE) -> Path:
    """Where the GGUF form of the draft in `folder`, made from `sources` (`draft_sources`), is
    kept in the user cache."""
    folder = Path(folder).resolve()
    weights_file, spec_file, target = sources
    weights = weights_file.stat()
    spec_text = spec_file.read_text()
    key = (f"{FORMAT}|{gguf_type}|{folder}|{weights.st_size}|{int(weights.st_mtime)}|{spec_text}|"
           f"{target.resolve()}|{target.stat().st_size}|{int(target.stat().st_mtime)}")
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return paths.cache_dir() / "drafts-gguf" / f"{folder.name}-{digest}" / f"{folder.name}.gguf"


def ensure_draft_gguf(folder: Path, progress: Progress = lambda _: None,
                      gguf_type: str = DEFAULT_TYPE) -> Path:
    """The GGUF file of the draft in `folder`, written on first use."""
    check_draft(Path(folder))
    sources = draft_sources(Path(folder))
    path = cached_path(Path(folder), sources, gguf_type)
    if not is_built(path.parent):
        progress(f"writing {path.name} for llama.cpp (first use only)")
    build_once(path.parent, lambda staging: export_draft(folder, staging / path.name,
                                                         gguf_type=gguf_type),
               f"GGUF form of {folder}", sources)
    return path


def gguf_file(ref: ModelRef, progress: Progress = lambda _: None) -> Path | None:
    """The GGUF file a reference runs from on llama.cpp, or None (a hub id, a plain folder).

    A `specchat distill` draft (a folder, `builtin:<draft>` or `builtin:<draft>.gguf`)
    runs from its GGUF form, written on first use.
    """
    if ref.kind == "builtin" and (draft := builtin_draft_gguf(ref.value)) is not None:
        return ensure_draft_gguf(draft, progress)
    if ref.kind == "builtin" and (draft := builtin_draft(ref.value)) is not None:
        return ensure_draft_gguf(draft, progress)
    if ref.kind == "folder" and is_draft_folder(Path(ref.value)):
        return ensure_draft_gguf(Path(ref.value), progress)
    if ref.kind == "builtin":
        return builtin_gguf(ref.value, progress)  # an unknown name fails here, naming the known
    return gguf_path(ref, progress)
