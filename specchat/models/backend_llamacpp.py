"""The llama.cpp backend object: a GGUF target or draft opened on llama.cpp, its tokenizer read
from the same file, and everything the loader asks of it (EOS, context, vocabulary, label).

A GGUF draft beside a llama.cpp target runs on llama.cpp too, with the target's threads;
one with a tokenizer of its own brings it (models/vocabulary.py decides, from the files'
headers). Where the
layers run (CPU, or offloaded to CUDA/Metal/Vulkan) is models/adapters.py's choice, handed
in through the `LoadRequest`. The decoding itself is model.py's.
"""

from __future__ import annotations

from typing import Any

from specchat.errors import PairError
from specchat.models.backend import LoadedModel, LoadRequest, Progress
from specchat.models.config.refs import ModelRef
from specchat.models.gguf import cache as gguf_cache
from specchat.models.llamacpp.model import LlamaCppModel
from specchat.models.llamacpp.repack import NOT_REPACKED


class LlamaCppBackend:
    """GGUF files decoded by llama.cpp (models/backend.py's `ModelBackend`)."""

    name = "llama.cpp"

    def device(self, device: str, device_why: str, gpu: str | None) -> tuple[str, str]:
        return "cpu", llamacpp_device_why(gpu)

    def load_target(self, ref: ModelRef, request: LoadRequest) -> LoadedModel:
        from specchat.models.weights import eos_token_ids

        model, tokenizer = load_llamacpp(ref, request.progress, decode_threads(request),
                                         request.gpu_layers, request.main_gpu,
                                         request.prefill_threads)
        return self._loaded(model, request, tokenizer,
                            frozenset(model.eos_ids | eos_token_ids(None, tokenizer)))

    def load_draft(self, ref: ModelRef, request: LoadRequest, target: LoadedModel) -> LoadedModel:
        from specchat.models.vocabulary import gguf_own_tokenizer

        model = open_llamacpp(ref, request.progress, target.raw.threads, request.gpu_layers,
                              request.main_gpu, target.raw.prefill_threads)
        tokenizer = gguf_own_tokenizer(request.pair, ref, request.progress)
        return self._loaded(model, request, tokenizer)

    def engine_model(self, loaded: LoadedModel, vocab_size: int,
                     request: LoadRequest) -> tuple[LlamaCppModel, str]:
        loaded.raw.vocab_size = vocab_size
        return loaded.raw, llamacpp_label(loaded.raw, request.gpu)

    def _loaded(self, model: LlamaCppModel, request: LoadRequest, tokenizer: Any = None,
                eos: frozenset[int] = frozenset()) -> LoadedModel:
        return LoadedModel(model, model.n_vocab, tokenizer, eos, model.context_length, "cpu",
                           llamacpp_device_why(request.gpu), model.weights,
                           "the GGUF file's own weights, computed by llama.cpp",
                           offloaded_to=request.gpu if model.offloaded else None)


def decode_threads(request: LoadRequest) -> int | None:
    """llama.cpp's threads while tokens stream: the request's, else one fewer than the
    physical cores where a screen draws beside them (the chat), else every core (None).
    llama.cpp's threads wait for each other at every step, so one of them sharing a core with
    the screen stalls them all: on 2 cores the then-default pair decoded 50 tokens/s in the
    chat on one thread, 25-31 on two (2026-11-23). A prompt is read on `prefill_threads`:
    nothing streams then."""
    from specchat.models.device.cores import physical_cores

    if request.threads or not request.beside_screen:
        return request.threads
    return max(1, physical_cores() - 1)


def llamacpp_device_why(gpu: str | None) -> str:
    """Where llama.cpp computes, as the pair's device reason."""
    if gpu is None:
        return "llama.cpp decodes on the CPU"
    return f"llama.cpp computes on {gpu}; logits and sampling on the CPU"


def open_llamacpp(ref: ModelRef, progress: Progress, threads: int | None = None,
                  gpu_layers: int = 0, main_gpu: int | None = None,
                  prefill_threads: int | None = None) -> LlamaCppModel:
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
    return LlamaCppModel(path, threads, gpu_layers=gpu_layers, main_gpu=main_gpu,
                         prefill_threads=prefill_threads)


def load_llamacpp(ref: ModelRef, progress: Progress, threads: int | None = None,
                  gpu_layers: int = 0, main_gpu: int | None = None,
                  prefill_threads: int | None = None) -> tuple[LlamaCppModel, Any]:
    """A GGUF file on llama.cpp, and the transformers tokenizer read from the same file."""
    model = open_llamacpp(ref, progress, threads, gpu_layers, main_gpu, prefill_threads)
    tokenizer = gguf_cache.load_tokenizer(model.path, progress)
    if len(tokenizer) > model.n_vocab:
        raise PairError(f"{model.path}: its tokenizer has {len(tokenizer)} tokens but llama.cpp "
                        f"reads a vocabulary of {model.n_vocab}: the file looks inconsistent")
    return model, tokenizer


def llamacpp_label(model: LlamaCppModel, gpu: str | None = None) -> str:
    """e.g. "llama.cpp (llama 135M Q4_1, 2 threads)" or "... , 30 of 30 layers on CUDA)"."""
    plural = "" if model.threads == 1 else "s"
    prompts = (f", prompts on {model.prefill_threads}" if model.prefill_threads != model.threads
               else "")
    where = f", {model.offloaded} of {model.layers} layers on {gpu}" if gpu and model.offloaded else ""
    notes = [model.threads_note] + ([] if model.repacked else [NOT_REPACKED])
    note = "".join(f"; {text}" for text in notes if text)
    return (f"llama.cpp ({model.description}, {model.threads} thread{plural}{prompts}{where}"
            f"{note})")
