"""Loading a pair from its `PairConfig`: target, draft, tokenizer, dtype, device, and the
report of each choice (`LoadedPair.reasons`, `backends`, the log line).

The models layer's entry point. Each model runs on the backend `adapters.choose_backends`
picks (torch or llama.cpp), the one place that choice is made; one model is loaded from its
reference by models/weights.py, the draft by models/draft_loader.py; the tokenizer is
always transformers' (read from the GGUF file for a GGUF model). Every failure a user can
cause (missing or unreadable file, uncached hub id, vocabulary mismatch, quantization
without CUDA, a draft larger than its target, a model that does not fit) becomes a
one-line `SpecchatError`. Where the layers go is `placement`'s decision; sizes and memory
figures are `memory`'s.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from specchat.engine.protocol import CausalModel
from specchat.errors import PairError
from specchat.models.adapters import Backends, choose_backends
from specchat.models.config.pairs import PairConfig
from specchat.models.config.refs import parse_ref
from specchat.models.device.hardware import dtype_name, resolve_device, resolve_dtype
from specchat.models.device.memory import (MemoryReport, check_draft_size, main_device,
                                           memory_report, plan_for, reset_peak)
from specchat.models.device.placement import Placement, layer_summary
from specchat.models.draft_loader import NgramLookup, draft_folder, load_draft
from specchat.models.llamacpp.model import LlamaCppModel
from specchat.models.torch_backend.adapter import TorchForward, torch_adapter
from specchat.models.weights import (Progress, eos_token_ids, llamacpp_label, load_llamacpp,
                                     load_model, model_folder)

log = logging.getLogger(__name__)


@dataclass
class LoadedPair:
    """Everything the chat layer needs to decode with a pair."""

    config: PairConfig
    target: CausalModel
    draft: CausalModel | NgramLookup | None
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

    @property
    def device_label(self) -> str:
        """Where the target computes, as shown to the user ("cuda", "cpu", "CUDA (llama.cpp)")."""
        return f"{self.offloaded_to} (llama.cpp)" if self.offloaded_to else self.device

    @property
    def eos_ids(self) -> set[int]:
        return set(self.eos)

    @property
    def draft_model(self) -> CausalModel | None:
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
              prefill_threads: int | None = None) -> LoadedPair:
    """Load the target and draft of `pair`; `dtype` overrides the pair's (torch models),
    `threads` the pair's `threads` (llama.cpp models; neither: every physical core), and
    `prefill_threads` theirs while a prompt is read (None: `threads`)."""
    started = time.perf_counter()
    device, device_why = resolve_device(pair.device)
    backends = choose_backends(pair, device)
    if backends.target == "llama.cpp":
        device, device_why = "cpu", llamacpp_device_why(backends)
    torch_dtype, dtype_why = resolve_dtype(dtype or pair.dtype, device)
    check_quantization(pair, device)
    progress(f"loading target {pair.target} ({backends.target})")
    placement = Placement(device, None, None, "") if backends.target == "llama.cpp" else None
    if placement is None:
        target_ref = parse_ref(pair.target)
        target_folder = model_folder(target_ref, progress)
        check_draft_size(pair, target_folder, draft_folder(pair, progress))
        placement = plan_for(pair, target_folder, torch_dtype)
    raw, tokenizer = load_target(pair, backends, torch_dtype, placement, progress,
                                 threads or pair.threads or None, prefill_threads)
    device = main_device(raw, placement.device) if backends.target == "torch" else device
    draft, draft_label = None, None
    if pair.draft:
        draft, draft_label = load_draft(pair, backends, torch_dtype, device, (raw, tokenizer),
                                        progress)
    quantized = pair.quantization != "none" or placement.device_map is not None
    target, target_label = target_adapter(raw, device, shared_vocab_size(raw, draft), quantized,
                                          TorchForward.of(pair), backends.gpu)
    if draft is not None and not isinstance(draft, NgramLookup):
        draft.vocab_size = target.vocab_size
    reset_peak(device)
    labels = {"target": target_label} | ({"draft": draft_label} if draft_label else {})
    dtype_label, dtype_why = weights_of(target, dtype_name(torch_dtype), dtype_why, draft_label)
    reasons = {"device": placement.why or device_why, "dtype": dtype_why, "backend": backends.why}
    log.info("pair %s: target %s, draft %s; backend choice: %s; device %s (%s); dtype %s (%s)",
             pair.name, labels["target"], labels.get("draft", pair.draft or "none"),
             backends.why, device, reasons["device"], dtype_label, dtype_why)
    return LoadedPair(pair, target, draft, tokenizer, device, dtype_label, reasons,
                      time.perf_counter() - started,
                      layer_summary(getattr(raw, "hf_device_map", None), device), labels,
                      frozenset(target_eos(raw, tokenizer)), target_context(raw),
                      backends.gpu if getattr(raw, "offloaded", 0) else None)


def weights_of(target, torch_dtype: str, why: str, draft_label: str | None) -> tuple[str, str]:
    """(the pair's dtype as shown, why): a llama.cpp target computes in its file's own type."""
    if not isinstance(target, LlamaCppModel):
        return torch_dtype, why
    why_gguf = "the GGUF file's own weights, computed by llama.cpp"
    if draft_label and draft_label.startswith("torch"):
        why_gguf += f"; the torch draft in {torch_dtype} ({why})"
    return target.weights, why_gguf


def llamacpp_device_why(backends: Backends) -> str:
    if backends.gpu is None:
        return "llama.cpp decodes on the CPU"
    return f"llama.cpp computes on {backends.gpu}; logits and sampling on the CPU"


def load_target(pair: PairConfig, backends: Backends, dtype, placement: Placement,
                progress: Progress, threads: int | None = None,
                prefill_threads: int | None = None):
    """(transformers model or LlamaCppModel, tokenizer) for the pair's target."""
    ref = parse_ref(pair.target)
    if backends.target == "llama.cpp":
        return load_llamacpp(ref, progress, threads, backends.gpu_layers, backends.main_gpu,
                             prefill_threads)
    return load_model(ref, dtype, placement.device, pair.quantization, progress, placement)


def target_adapter(raw, device: str, vocab_size: int, quantized: bool,
                   how: TorchForward = TorchForward(), gpu: str | None = None):
    """(the engine adapter, its label) for a loaded target."""
    if isinstance(raw, LlamaCppModel):
        raw.vocab_size = vocab_size
        return raw, llamacpp_label(raw, gpu)
    return torch_adapter(raw, device, vocab_size, quantized=quantized, how=how)


def target_eos(raw, tokenizer) -> set[int]:
    if isinstance(raw, LlamaCppModel):
        return raw.eos_ids | eos_token_ids(None, tokenizer)
    return eos_token_ids(raw, tokenizer)


def target_context(raw) -> int:
    if isinstance(raw, LlamaCppModel):
        return raw.context_length
    return int(getattr(raw.config, "max_position_embeddings", 2048) or 2048)


def shared_vocab_size(target, draft) -> int:
    """Logit columns both models share (their heads may be padded differently)."""
    if isinstance(target, LlamaCppModel):
        size = target.n_vocab
    else:
        size = target.get_output_embeddings().weight.shape[0]
    if draft is not None and not isinstance(draft, NgramLookup):
        size = min(size, draft.vocab_size)
    return size


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
