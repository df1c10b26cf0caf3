"""Loading a pair from its `PairConfig`: target, draft, tokenizer, dtype, device.

The only place (with its sibling modules) that imports transformers. Each model
runs on the backend `adapters.choose_backends` picks (torch or llama.cpp); the
tokenizer is always transformers' (read from the GGUF file for a GGUF model). Every
failure a user can cause (missing or unreadable file, uncached hub id, vocabulary
mismatch, quantization without CUDA, a draft larger than its target, a model that does
not fit) becomes a one-line `SpecchatError`. Where the layers go is `placement`'s
decision; sizes and memory figures are `memory`'s.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from specchat import paths
from specchat.engine.protocol import CausalModel
from specchat.errors import ModelNotFound, OutOfMemory, PairError
from specchat.models.gguf import cache as gguf_cache
from specchat.models.adapters import Backends, choose_backends
from specchat.models.torch_backend.adapter import TorchForward, torch_adapter
from specchat.models.config.pairs import PairConfig
from specchat.models.device.hardware import dtype_name, resolve_device, resolve_dtype
from specchat.models.torch_backend.hf import HFCausalModel
from specchat.models.llamacpp.model import LlamaCppModel
from specchat.models.vocabulary import check_same_llamacpp_vocabulary, check_same_vocabulary
from specchat.models.device.memory import (MemoryReport, check_draft_size, main_device, memory_report,
                                    plan_for, reset_peak)
from specchat.models.device.placement import Placement, layer_summary
from specchat.models.config.hub import hub_folder, hub_model_folder
from specchat.models.config.refs import (GGUF_KINDS, ModelRef, builtin_draft, builtin_draft_gguf,
                                         gguf_path, parse_ref)

Progress = Callable[[str], None]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NgramLookup:
    """A prompt-lookup draft (no model): the n-gram lengths it matches."""

    max_ngram: int
    min_ngram: int


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
    offloaded_to: str | None = None
    """The GPU a llama.cpp target's layers run on ("CUDA", "Metal"; None: none), while its
    logits, and so `device`, stay on the CPU."""
    """Most tokens the target's cache holds (its trained context, or llama.cpp's n_ctx)."""

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


def eos_token_ids(model, tokenizer) -> set[int]:
    ids: set[int] = set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (configured, tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return ids


def load_pair(pair: PairConfig, dtype: str | None = None,
              progress: Progress = lambda _: None, threads: int | None = None) -> LoadedPair:
    """Load the target and draft of `pair`; `dtype` overrides the pair's (torch models),
    `threads` the pair's `threads` (a llama.cpp target; neither: every physical core)."""
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
                                 threads or pair.threads or None)
    device = main_device(raw, placement.device) if backends.target == "torch" else device
    draft, draft_label = None, None
    if pair.draft:
        draft, draft_label = load_draft(pair, backends, torch_dtype, device, (raw, tokenizer),
                                        progress)
    quantized = pair.quantization != "none" or placement.device_map is not None
    target, target_label = target_adapter(raw, device, shared_vocab_size(raw, draft), quantized,
                                          torch_forward(pair), backends.gpu)
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
                progress: Progress, threads: int | None = None):
    """(transformers model or LlamaCppModel, tokenizer) for the pair's target."""
    ref = parse_ref(pair.target)
    if backends.target == "llama.cpp":
        return load_llamacpp(ref, progress, threads, backends.gpu_layers)
    return load_model(ref, dtype, placement.device, pair.quantization, progress, placement)


def open_llamacpp(ref: ModelRef, progress: Progress, threads: int | None = None,
                  gpu_layers: int = 0) -> LlamaCppModel:
    """A GGUF file on llama.cpp (a `specchat distill` draft runs from its GGUF form, written
    on first use)."""
    from specchat.models.gguf.drafts import gguf_file

    from specchat.models.gguf.integrity import check_gguf_file

    path = gguf_file(ref, progress)
    if path is None:
        raise PairError(f"{ref.value} is not a GGUF file: llama.cpp needs one (or use the torch "
                        "backend)")
    if path.is_file():
        check_gguf_file(path)
    return LlamaCppModel(path, threads, gpu_layers=gpu_layers)


def load_llamacpp(ref: ModelRef, progress: Progress, threads: int | None = None,
                  gpu_layers: int = 0) -> tuple[LlamaCppModel, Any]:
    """A GGUF file on llama.cpp, and the transformers tokenizer read from the same file."""
    model = open_llamacpp(ref, progress, threads, gpu_layers)
    path = model.path
    tokenizer = gguf_cache.load_tokenizer(path, progress)
    if len(tokenizer) > model.n_vocab:
        raise PairError(f"{path}: its tokenizer has {len(tokenizer)} tokens but llama.cpp reads "
                        f"a vocabulary of {model.n_vocab}: the file looks inconsistent")
    return model, tokenizer


def torch_forward(pair: PairConfig) -> TorchForward:
    """The pair's choice of torch forward (keys `torch_forward`, `cuda_graphs`)."""
    return TorchForward(pair.torch_forward, pair.cuda_graphs)


def target_adapter(raw, device: str, vocab_size: int, quantized: bool,
                   how: TorchForward = TorchForward(), gpu: str | None = None):
    """(the engine adapter, its label) for a loaded target."""
    if isinstance(raw, LlamaCppModel):
        raw.vocab_size = vocab_size
        return raw, llamacpp_label(raw, gpu)
    return torch_adapter(raw, device, vocab_size, quantized=quantized, how=how)


def llamacpp_label(model: LlamaCppModel, gpu: str | None = None) -> str:
    """e.g. "llama.cpp (llama 135M Q4_1, 2 threads)" or "... , 30 of 30 layers on CUDA)"."""
    plural = "" if model.threads == 1 else "s"
    where = f", {model.offloaded} of {model.layers} layers on {gpu}" if gpu and model.offloaded else ""
    note = f"; {model.threads_note}" if model.threads_note else ""
    return f"llama.cpp ({model.description}, {model.threads} thread{plural}{where}{note})"


def target_eos(raw, tokenizer) -> set[int]:
    if isinstance(raw, LlamaCppModel):
        return raw.eos_ids | eos_token_ids(None, tokenizer)
    return eos_token_ids(raw, tokenizer)


def target_context(raw) -> int:
    if isinstance(raw, LlamaCppModel):
        return raw.context_length
    return int(getattr(raw.config, "max_position_embeddings", 2048) or 2048)


def load_draft(pair: PairConfig, backends: Backends, dtype, device, target: tuple[Any, Any],
               progress: Progress):
    """(draft model or n-gram lookup, label of its model's backend or None); `target` is the
    loaded target and its tokenizer, whose vocabulary the draft must share."""
    ref = parse_ref(pair.draft)
    if ref.kind == "ngram":
        return NgramLookup(max_ngram=pair.ngram_n, min_ngram=min(2, pair.ngram_n)), None
    progress(f"loading draft {pair.draft} ({backends.draft})")
    target_model, target_tokenizer = target
    if backends.draft == "llama.cpp":  # then the target runs on llama.cpp too
        model = open_llamacpp(ref, progress, gpu_layers=backends.gpu_layers)
        check_same_llamacpp_vocabulary(pair, target_model, model)
        return model, llamacpp_label(model, backends.gpu)
    quantization = pair.draft_quantization
    model, tokenizer = load_model(ref, dtype, device, quantization, progress)
    check_same_vocabulary(pair, target_tokenizer, tokenizer)
    vocab, int8 = distill_facts(model_folder(ref, progress))
    adapter, label = torch_adapter(model, device, head_ids=vocab, int8=int8, how=torch_forward(pair),
                                   quantized=quantization != "none")
    return adapter, label


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


def model_folder(ref: ModelRef, progress: Progress = lambda _: None) -> Path | str:
    """A folder (or cached hub id) transformers can load `ref` from."""
    if ref.kind == "builtin" and builtin_draft(ref.value) is not None:
        return assembled_draft(builtin_draft(ref.value), progress)
    if ref.kind == "builtin" and builtin_draft_gguf(ref.value) is not None:
        return assembled_draft(builtin_draft_gguf(ref.value), progress)  # same draft on torch
    if ref.kind == "builtin" or ref.kind in GGUF_KINDS:
        return gguf_cache.ensure_converted(gguf_file_of(ref, progress), progress)
    if ref.kind == "folder":
        if not Path(ref.value).is_dir():
            raise ModelNotFound(f"model folder {ref.value} does not exist: check the path in models.toml")
        if is_shipped_draft(Path(ref.value)):
            return assembled_draft(Path(ref.value), progress)
        if not (Path(ref.value) / "config.json").is_file():
            raise ModelNotFound(f"model folder {ref.value} has no config.json: "
                                "point to a folder saved with save_pretrained")
        return Path(ref.value)
    if ref.kind == "hf":
        return hub_model_folder(ref.value, progress)
    return hub_folder(ref.value, progress)


def gguf_file_of(ref: ModelRef, progress: Progress = lambda _: None) -> Path:
    """The GGUF file of a built-in model or a GGUF reference (an unknown built-in name fails)."""
    from specchat.models.config.refs import builtin_gguf

    return gguf_path(ref, progress) or builtin_gguf(ref.value)


def is_shipped_draft(folder: Path) -> bool:
    """A `specchat distill` output: own weights + spec, no full model of its own."""
    return (folder / "specchat-draft.json").is_file() and not (folder / "config.json").is_file()


def assembled_draft(folder: Path, progress: Progress = lambda _: None) -> Path:
    from specchat.models.torch_backend.shipped_draft import ensure_assembled

    return ensure_assembled(folder, float32_cpu_model, progress)


def float32_cpu_model(reference: str, progress: Progress):
    """(model, tokenizer) of a reference in float32 on the CPU: a shipped draft's target."""
    return load_model(parse_ref(reference), torch.float32, "cpu", "none", progress)


def load_model(ref: ModelRef, dtype: torch.dtype, device: str, quantization: str,
               progress: Progress = lambda _: None, placement: Placement | None = None):
    """(transformers model, tokenizer) for a reference, on `device` in `dtype`; a
    `placement` with a device_map lets accelerate spread the layers instead."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    from specchat.models.torch_backend.safetensors_check import check_safetensors_folder

    folder = model_folder(ref, progress)
    check_safetensors_folder(folder)  # a cut file: one line, not transformers' traceback
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    kwargs = load_kwargs(dtype, device, quantization, placement)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    except (OSError, ValueError) as error:
        raise ModelNotFound(f"cannot load model {ref} from {folder}: {first_line(error)}") from None
    except torch.OutOfMemoryError:
        raise OutOfMemory(f"model {ref} does not fit in {device}'s free memory: use "
                          "quantization = \"4bit\", device = \"auto\" or a smaller model") from None
    if "device_map" not in kwargs:
        model = model.to(device)
    return model.eval(), tokenizer


def load_kwargs(dtype: torch.dtype, device: str, quantization: str,
                placement: Placement | None) -> dict[str, Any]:
    """`from_pretrained` keywords: dtype, bitsandbytes config, device_map and max_memory."""
    kwargs: dict[str, Any] = {"dtype": dtype}
    spread = placement is not None and placement.device_map is not None
    if spread:
        kwargs.update(placement.kwargs())
        if "disk" in placement.max_memory:
            kwargs["offload_folder"] = str(paths.cache_dir() / "offload")
    if quantization != "none":
        offload = spread and "cpu" in placement.max_memory
        kwargs["quantization_config"] = bnb_config(quantization, dtype, offload)
        kwargs.setdefault("device_map", device)
    return kwargs


def bnb_config(quantization: str, compute_dtype: torch.dtype, cpu_offload: bool = False):
    """nf4 (4bit) or LLM.int8 (8bit); computing in bfloat16 unless float16 was asked for."""
    from transformers import BitsAndBytesConfig

    compute = torch.float16 if compute_dtype == torch.float16 else torch.bfloat16
    if quantization == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True, llm_int8_enable_fp32_cpu_offload=cpu_offload)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=compute,
                              bnb_4bit_quant_type="nf4",
                              llm_int8_enable_fp32_cpu_offload=cpu_offload)


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def context_tokens(folder: Path | str, device: str) -> int:
    """The context the pair budgets by: the static cache's size on CUDA, the model's elsewhere."""
    from transformers import AutoConfig

    from specchat.models.torch_backend.static import static_length

    config = AutoConfig.from_pretrained(folder)
    if device.startswith("cuda"):
        return static_length(config)
    return int(getattr(config, "max_position_embeddings", 2048) or 2048)
