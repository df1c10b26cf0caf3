"""A pair's draft: an n-gram lookup (no model), a GGUF draft on llama.cpp beside a llama.cpp
target, or a transformers draft on torch (a `specchat distill` draft with its reduced
vocabulary and int8 weights), checked to share its target's vocabulary.

The backend each draft runs on comes from models/adapters.py (`Backends`), the model itself
from models/weights.py; models/loader.py calls this with the loaded target.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specchat.models.adapters import Backends
from specchat.models.config.pairs import PairConfig
from specchat.models.config.refs import parse_ref
from specchat.models.torch_backend.adapter import TorchForward, torch_adapter
from specchat.models.vocabulary import check_same_llamacpp_vocabulary, check_same_vocabulary
from specchat.models.weights import (Progress, llamacpp_label, load_model, model_folder,
                                     open_llamacpp)

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class NgramLookup:
    """A prompt-lookup draft (no model): the n-gram lengths it matches."""

    max_ngram: int
    min_ngram: int


def load_draft(pair: PairConfig, backends: Backends, dtype: torch.dtype, device: str,
               target: tuple[Any, Any], progress: Progress):
    """(draft model or n-gram lookup, label of its model's backend or None); `target` is the
    loaded target and its tokenizer, whose vocabulary the draft must share."""
    ref = parse_ref(pair.draft)
    if ref.kind == "ngram":
        return NgramLookup(max_ngram=pair.ngram_n, min_ngram=min(2, pair.ngram_n)), None
    progress(f"loading draft {pair.draft} ({backends.draft})")
    target_model, target_tokenizer = target
    if backends.draft == "llama.cpp":  # then the target runs on llama.cpp too
        model = open_llamacpp(ref, progress, target_model.threads, backends.gpu_layers,
                              backends.main_gpu, target_model.prefill_threads)  # the chat's choice too
        check_same_llamacpp_vocabulary(pair, target_model, model)
        return model, llamacpp_label(model, backends.gpu)
    quantization = pair.draft_quantization
    model, tokenizer = load_model(ref, dtype, device, quantization, progress)
    check_same_vocabulary(pair, target_tokenizer, tokenizer)
    vocab, int8 = distill_facts(model_folder(ref, progress))
    return torch_adapter(model, device, head_ids=vocab, int8=int8, how=TorchForward.of(pair),
                         quantized=quantization != "none")


def draft_folder(pair: PairConfig, progress: Progress) -> Path | str | None:
    if not pair.draft or parse_ref(pair.draft).kind == "ngram":
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
