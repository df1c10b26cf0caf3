"""What a pair's draft is before any backend loads it: an n-gram lookup (no model), where a
draft model's folder is, and what a `specchat distill` draft recorded about itself (its
reduced vocabulary, its int8 weights). The draft model itself is loaded by the backend
models/adapters.py chose for it (models/backend.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specchat.models.config.pairs import PairConfig
from specchat.models.config.refs import head_file, parse_ref
from specchat.models.weights import Progress, model_folder


@dataclass(frozen=True)
class NgramLookup:
    """A prompt-lookup draft (no model): the n-gram lengths it matches."""

    max_ngram: int
    min_ngram: int


def draft_folder(pair: PairConfig, progress: Progress) -> Path | str | None:
    """The draft model's folder; None for no draft, an n-gram lookup or a draft head (a file
    of its own weights, models/head/)."""
    if not pair.draft or parse_ref(pair.draft).kind == "ngram" or head_file(parse_ref(pair.draft)):
        return None
    return model_folder(parse_ref(pair.draft), progress)


def distill_facts(folder: Path | str) -> tuple[list[int] | None, bool]:
    """A `specchat distill` draft's reduced vocabulary and whether it shipped as int8
    (then it is multiplied by its int8 weights); (None, False) for any other model."""
    from specchat.models.torch_backend.shipped_draft import SPEC_FILE, DraftSpec

    if not (Path(folder) / SPEC_FILE).is_file():
        return None, False
    spec = DraftSpec.load(Path(folder))
    return spec.vocab, spec.info.get("weights") == "int8"
