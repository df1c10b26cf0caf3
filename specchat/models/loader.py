"""Loading a pair from its `PairConfig`: target, draft, tokenizer, dtype, device, and the
report of each choice (`LoadedPair.reasons`, `backends`, the log line).

The models layer's entry point. Each model runs on the backend `adapters.choose_backends`
picks (torch, llama.cpp or int8), the one place that choice is made. The chosen backend
object (models/backend.py's `ModelBackend`) loads the model and answers everything the
pair needs of it: EOS, context, logit columns, weights, label; this module never asks a
model which backend made it. The tokenizer is always transformers' (read from the GGUF file
for a GGUF model); a draft with a tokenizer of its own brings it (`draft_tokenizer`:
models/vocabulary.py decides). The target computes all of its logit columns; a draft that
shares its tokenizer proposes among those the target has (`draft_columns`). Every failure a
user can cause (missing or unreadable file, uncached hub id, quantization without CUDA, a
draft larger than its target, a model that does not fit) becomes a one-line `SpecchatError`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

from specchat.engine.protocol import CausalModel, DraftHead
from specchat.errors import PairError
from specchat.models.adapters import Backends, backend_named, choose_backends
from specchat.models.backend import LoadedModel, LoadRequest, Progress
from specchat.models.config.pairs import PairConfig
from specchat.models.config.refs import head_file, parse_ref
from specchat.models.device.hardware import resolve_device, resolve_dtype
from specchat.models.device.memory import MemoryReport, memory_report, reset_peak
from specchat.models.draft_loader import NgramLookup

log = logging.getLogger(__name__)


@dataclass
class LoadedPair:
    """Everything the chat layer needs to decode with a pair."""

    config: PairConfig
    target: CausalModel
    draft: CausalModel | DraftHead | NgramLookup | None
    """The draft model (adapted to the engine's protocol), an n-gram lookup, or none; the
    chat layer builds the engine's drafter from it (chat/decoding.py)."""
    tokenizer: Any
    device: str
    dtype: str
    reasons: dict[str, str] = field(default_factory=dict)
    """Why the device, dtype and backends were chosen (keys device, dtype, backend)."""
    load_s: float = 0.0
    placement: str = ""
    """Where the target's layers went ("all on cuda", "cuda:0 22 layers, cpu 10 layers")."""
    backends: dict[str, str] = field(default_factory=dict)
    """What computes each model's logits, e.g. {"target": "llama.cpp (llama 135M Q4_1,
    2 threads)", "draft": "torch (lean int8)"}; no "draft" key without a draft model."""
    eos: frozenset[int] = frozenset()
    context: int = 2048
    """Most tokens the target's cache holds (its trained context, or llama.cpp's n_ctx)."""
    offloaded_to: str | None = None
    """The GPU a llama.cpp target's layers run on ("CUDA", "Metal"; None: none), while its
    logits, and so `device`, stay on the CPU."""
    draft_tokenizer: Any = None
    """The draft model's own tokenizer where it is not the target's (the chat layer turns its
    text into the target's tokens, chat/cross/); None for a draft that shares it."""

    @property
    def device_label(self) -> str:
        """Where the target computes, as shown to the user ("cuda", "cpu", "CUDA (llama.cpp)")."""
        return f"{self.offloaded_to} (llama.cpp)" if self.offloaded_to else self.device

    @property
    def eos_ids(self) -> set[int]:
        return set(self.eos)

    @property
    def draft_model(self) -> CausalModel | DraftHead | None:
        return None if isinstance(self.draft, NgramLookup) else self.draft

    @property
    def has_draft(self) -> bool:
        return self.draft is not None

    @property
    def memory_bytes(self) -> int:
        models = (self.target, self.draft_model)
        return sum(getattr(model, "parameter_bytes", 0) for model in models if model is not None)

    def memory(self) -> MemoryReport:
        """Weights per model, KV cache bytes, and the peak since loading (CUDA only)."""
        return memory_report(self.target, self.draft_model, self.device)

    @property
    def context_length(self) -> int:
        """The longest sequence both models' caches hold: what the session budgets by (the
        target's context, less where a preallocated cache of either model holds fewer)."""
        limits = [int(getattr(m, "context_limit", 0) or 0) for m in (self.target, self.draft_model)
                  if m is not None]
        return min([self.context] + [n for n in limits if n > 0])


def load_pair(pair: PairConfig, dtype: str | None = None,
              progress: Progress = lambda _: None, threads: int | None = None,
              prefill_threads: int | None = None, beside_screen: bool = False) -> LoadedPair:
    """Load the target and draft of `pair`; `dtype` overrides the pair's (torch models),
    `threads` the pair's `threads` (CPU backends; neither: each backend's choice, every
    physical core unless `beside_screen`: a screen draws while the pair decodes), and
    `prefill_threads` theirs while a prompt is read (None: `threads`)."""
    started = time.perf_counter()
    device, device_why = resolve_device(pair.device)
    backends = choose_backends(pair, device)
    target_backend = backend_named(backends.target)
    device, device_why = target_backend.device(device, device_why, backends.gpu)
    check_quantization(pair, device)
    request = load_request(pair, device, device_why, backends, dtype, progress,
                           threads or pair.threads or None, prefill_threads, beside_screen)
    progress(f"loading target {pair.target} ({backends.target})")
    target = target_backend.load_target(parse_ref(pair.target), request)
    request = replace(request, device=target.device)
    lookup, draft_loaded = load_draft(pair, backends, request, target, progress)
    draft: CausalModel | DraftHead | NgramLookup | None = lookup
    model, target_label = target_backend.engine_model(target, target.logit_columns, request)
    labels = {"target": target_label}
    if draft_loaded is not None and draft_loaded.options.get("head"):
        draft, labels["draft"] = head_beside(pair, draft_loaded, model, target.logit_columns)
    elif draft_loaded is not None:
        assert backends.draft is not None, "a loaded draft model has a backend"
        draft, labels["draft"] = backend_named(backends.draft).engine_model(
            draft_loaded, draft_columns(target, draft_loaded), request)
    reset_peak(target.device)
    reasons = {"device": target.device_why or device_why,
               "dtype": weights_why(target, draft_loaded), "backend": backends.why}
    log.info("pair %s: target %s, draft %s; backend choice: %s; device %s (%s); weights %s (%s)",
             pair.name, labels["target"], labels.get("draft", pair.draft or "none"),
             backends.why, target.device, reasons["device"], target.weights, reasons["dtype"])
    return LoadedPair(config=pair, target=model, draft=draft, tokenizer=target.tokenizer,
                      device=target.device, dtype=target.weights, reasons=reasons,
                      load_s=time.perf_counter() - started, placement=target.placement,
                      backends=labels, eos=target.eos, context=target.context,
                      offloaded_to=target.offloaded_to,
                      draft_tokenizer=draft_tokenizer(pair, target, draft_loaded))


def draft_tokenizer(pair: PairConfig, target: LoadedModel, draft: LoadedModel | None) -> Any:
    """The draft's own tokenizer where its text is re-tokenized for the target: one of another
    tokenizer, or (`retokenize = "always"`) the target's own; None: one tokenizer."""
    if draft is None:
        return None
    if draft.tokenizer is None and pair.retokenize == "always":
        return target.tokenizer
    return draft.tokenizer


def draft_columns(target: LoadedModel, draft: LoadedModel) -> int:
    """The logit columns a draft proposes from: its own where it has a tokenizer of its own;
    else those its target also has (a padded head's extra rows, or special tokens only one
    model added, are never proposed). The target always computes all of its own."""
    if draft.tokenizer is not None:
        return draft.logit_columns
    return min(draft.logit_columns, target.logit_columns)


def load_request(pair: PairConfig, device: str, device_why: str, backends: Backends,
                 dtype: str | None, progress: Progress, threads: int | None,
                 prefill_threads: int | None, beside_screen: bool) -> LoadRequest:
    """What every backend needs to load the pair's models on `device`."""
    torch_dtype, dtype_why = resolve_dtype(dtype or pair.dtype, device)
    return LoadRequest(pair, device, device_why, torch_dtype, dtype_why, threads,
                       prefill_threads, beside_screen, backends.gpu_layers, backends.gpu,
                       backends.main_gpu, progress)


def load_draft(pair: PairConfig, backends: Backends, request: LoadRequest, target: LoadedModel,
               progress: Progress) -> tuple[NgramLookup | None, LoadedModel | None]:
    """(an n-gram lookup or None, the draft model as its backend loaded it or None)."""
    if not pair.draft:
        return None, None
    ref = parse_ref(pair.draft)
    if ref.kind == "ngram":
        return NgramLookup(max_ngram=pair.ngram_n, min_ngram=min(2, pair.ngram_n)), None
    progress(f"loading draft {pair.draft} ({backends.draft})")
    assert backends.draft is not None, "choose_backends names one for every draft model"
    if (head := head_file(ref)) is not None:
        return None, backend_named(backends.draft).load_head(head, request, target)
    return None, backend_named(backends.draft).load_draft(ref, request, target)


def head_beside(pair: PairConfig, head: LoadedModel, target: CausalModel,
                columns: int) -> tuple[DraftHead, str]:
    """A draft head's run time and label; a `PairError` where the target's forward keeps no
    features for it (transformers' eager forward)."""
    from specchat.engine.protocol import FeatureSource

    if not isinstance(target, FeatureSource):
        raise PairError(f"pair '{pair.name}': the draft head {pair.draft} reads the target's "
                        "hidden states, and this target's forward keeps none: set "
                        "torch_forward = \"static\" (or backend = \"int8\" for a GGUF target)")
    head.raw.vocab_size = columns
    return head.raw, head.options["label"]


def weights_why(target: LoadedModel, draft: LoadedModel | None) -> str:
    """Why the pair computes in its weights' types: the target's, and a draft's in another."""
    if draft is None or draft.weights == target.weights:
        return target.weights_why
    return f"{target.weights_why}; the draft in {draft.weights} ({draft.weights_why})"


def check_quantization(pair: PairConfig, device: str) -> None:
    """4bit/8bit (target or draft) need a CUDA GPU and bitsandbytes: one-line errors."""
    for key, value in (("quantization", pair.quantization),
                       ("draft_quantization", pair.draft_quantization)):
        if value == "none":
            continue
        if not device.startswith("cuda"):
            raise PairError(f"pair '{pair.name}': {key} = \"{value}\" needs a CUDA GPU "
                            f"(bitsandbytes); set {key} = \"none\" to run on this machine")
        import importlib.util

        if importlib.util.find_spec("bitsandbytes") is None:
            raise PairError(f"pair '{pair.name}': {key} = \"{value}\" needs bitsandbytes: "
                            "pip install 'specchat[bitsandbytes]'")
