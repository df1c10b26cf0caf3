"""llama.cpp's own decoding of a GGUF file (llama-cpp-python), for `bench` to compare with.

- `open_llama`: a `llama_cpp.Llama` on a file, quiet, with the thread count given.
- `llama_generate`: the bindings' own `generate` loop from the same prompt ids,
  stopping at an end-of-answer id or after `max_new_tokens`, the end id included
  as specchat's engine counts it. Every answer starts from an empty cache (the
  bindings would otherwise reuse a cached prompt prefix and skip prefill).
- Speculation the bindings offer: their `draft_model` hook, which verifies a
  draft's tokens in one batch and keeps the prefix that matches its own greedy or
  sampled choice. The bindings ship one drafter for it, prompt lookup
  (`LlamaPromptLookupDecoding`); they have no draft-model drafter, so
  `GgufDraftModel` feeds the same hook from a second GGUF model (greedy, k tokens,
  its cache reused across rounds by the bindings' prefix match).
- `speculation_incompatibility`: llama.cpp's own check that a draft may serve a
  target (common/speculative.cpp), ported through the bindings' vocabulary calls.
- `evaluation`: evaluations of n tokens with logits for all n after a context evaluated
  once, the cache cut back after each: what a verify does on llama.cpp, for
  bench/llamacpp_profile.py to time with the engine's timer (engine/costs.py).

Sampling settings are the engine's `SamplingParams` (engine/params.py, torch-free); knows
nothing else about specchat's engine, nor about reports.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from specchat.engine.params import SamplingParams
from specchat.errors import ModelNotFound, UsageError
from specchat.models.device.cores import capped_threads
from specchat.models.llamacpp.repack import repack_allowed


def llama_cpp_module():
    try:
        import llama_cpp
    except ImportError:
        raise UsageError("llama.cpp baselines need llama-cpp-python: "
                         "pip install llama-cpp-python") from None
    return llama_cpp


def open_llama(path: Path, threads: int, n_ctx: int = 2048, draft_model=None,
               logits_all: bool = False, seed: int = 0, gpu_layers: int = 0,
               main_gpu: int | None = None):
    """A quiet `llama_cpp.Llama` on the GGUF file `path` (threads capped to the usable cores),
    with `gpu_layers` offloaded as specchat's own llama.cpp model places them
    (models/llamacpp/model.py's `load_model`: -1 all, on GPU `main_gpu` alone where given)."""
    llama_cpp = llama_cpp_module()
    threads, _ = capped_threads(threads)
    if not Path(path).is_file():
        raise ModelNotFound(f"GGUF file {path} does not exist: check the pair's model reference")
    placement = {"n_gpu_layers": gpu_layers}
    if main_gpu is not None and gpu_layers != 0:
        placement |= {"split_mode": llama_cpp.LLAMA_SPLIT_MODE_NONE, "main_gpu": main_gpu}
    try:
        with default_repacking(llama_cpp, repack_allowed()):
            return llama_cpp.Llama(str(path), n_ctx=n_ctx, n_threads=threads,
                                   n_threads_batch=threads, n_batch=512, draft_model=draft_model,
                                   logits_all=logits_all, seed=seed, verbose=False, **placement)
    except ValueError as error:
        raise ModelNotFound(f"llama.cpp cannot load {path} ({error}): "
                            "is it a complete GGUF model?") from None


@contextmanager
def default_repacking(llama_cpp: Any, allowed: bool) -> Iterator[None]:
    """While it lasts, the bindings' default model parameters repack weights only where
    `allowed`: `llama_cpp.Llama` takes no `use_extra_bufts` of its own but builds its
    parameters from those defaults (models/llamacpp/repack.py says why it may not)."""
    low_level = llama_cpp.llama_cpp
    original = low_level.llama_model_default_params

    def defaults() -> Any:
        params = original()
        params.use_extra_bufts = allowed
        return params

    low_level.llama_model_default_params = defaults
    try:
        yield
    finally:
        low_level.llama_model_default_params = original


def llama_generate(llm, prompt: Sequence[int], max_new_tokens: int, eos_ids: set[int],
                   sampling: SamplingParams = SamplingParams(), seed: int = 0) -> list[int]:
    """New ids from the bindings' own generate loop, from an empty cache (greedy where the
    engine would be: llama.cpp's sampler treats a temperature of 0 or less as greedy)."""
    llm.reset()
    llm.set_seed(seed)
    out: list[int] = []
    temperature = 0.0 if sampling.greedy else sampling.temperature
    stream = llm.generate(list(prompt), temp=temperature, top_k=sampling.top_k,
                          top_p=sampling.top_p, min_p=0.0, repeat_penalty=1.0, reset=True)
    for token in stream:
        out.append(int(token))
        if token in eos_ids or len(out) >= max_new_tokens:
            break
    stream.close()
    return out


def prompt_lookup(k: int, max_ngram: int):
    """The bindings' prompt-lookup drafter: up to k tokens after the last n-gram's match."""
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    return LlamaPromptLookupDecoding(max_ngram_size=max_ngram, num_pred_tokens=k)


def gguf_draft_model(path: Path, k: int, threads: int, n_ctx: int = 2048, **placement):
    """The bindings' draft hook fed by a GGUF draft model (greedy, k tokens a round), placed
    as `open_llama`'s `gpu_layers` and `main_gpu` say."""
    from llama_cpp.llama_speculative import LlamaDraftModel

    class GgufDraftModel(LlamaDraftModel):
        def __init__(self):
            self.llm = open_llama(path, threads, n_ctx, **placement)
            self.k = k

        def __call__(self, input_ids, /, **kwargs):
            drafted = []
            stream = self.llm.generate(input_ids.tolist(), temp=0.0, top_k=1, min_p=0.0,
                                       repeat_penalty=1.0, reset=True)
            for token in stream:
                drafted.append(int(token))
                if len(drafted) >= self.k:
                    break
            stream.close()
            return np.array(drafted, dtype=np.intc)

    return GgufDraftModel()


VOCAB_MAX_SIZE_DIFFERENCE = 128
VOCAB_CHECK_START_TOKEN_ID = 5
"""llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE and SPEC_VOCAB_CHECK_START_TOKEN_ID."""


def speculation_incompatibility(target, draft) -> str | None:
    """Why llama.cpp's speculative tools would refuse `draft` for `target` (two opened
    `Llama`s), as common_speculative_are_compatible decides; None when they accept it."""
    llama_cpp = llama_cpp_module()
    tgt, dft = (llama_cpp.llama_model_get_vocab(m.model) for m in (target, draft))
    if llama_cpp.llama_vocab_type(tgt) != llama_cpp.llama_vocab_type(dft):
        return "vocabulary types differ"
    for add, special, name in ((llama_cpp.llama_vocab_get_add_bos, llama_cpp.llama_vocab_bos, "bos"),
                               (llama_cpp.llama_vocab_get_add_eos, llama_cpp.llama_vocab_eos, "eos")):
        if add(tgt) != add(dft) or (add(tgt) and special(tgt) != special(dft)):
            return f"{name} tokens differ"
    sizes = llama_cpp.llama_vocab_n_tokens(tgt), llama_cpp.llama_vocab_n_tokens(dft)
    if abs(sizes[0] - sizes[1]) > VOCAB_MAX_SIZE_DIFFERENCE:
        return f"vocabulary sizes {sizes[0]} and {sizes[1]} differ by more than 128"
    for token in range(VOCAB_CHECK_START_TOKEN_ID, min(sizes)):
        if llama_cpp.llama_vocab_get_text(tgt, token) != llama_cpp.llama_vocab_get_text(dft, token):
            return f"token {token} differs"
    return None


def evaluation(llm, context: Sequence[int]) -> Callable[[list[int]], None]:
    """A call that evaluates its ids (logits for all) after `context`, which is evaluated now.

    `llm` must be opened with logits_all=True. The call cuts the cache back to the context
    after each evaluation (the bindings' eval removes cells past `n_tokens`), so every call,
    of any ids, starts from the context alone.
    """
    llm.reset()
    llm.eval(list(context))
    base = llm.n_tokens

    def evaluate(ids: list[int]) -> None:
        llm.eval(ids)
        llm.n_tokens = base

    return evaluate
