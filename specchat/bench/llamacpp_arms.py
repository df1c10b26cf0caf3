"""The llama.cpp contenders of a benchmark, and the one place `bench` gets its arms from.

For a pair whose target runs on llama.cpp, the baselines are llama.cpp's own on
the same GGUF file: its generate loop (`llama`), and its own speculation where
the bindings offer it (`llama_spec`): prompt lookup for an `ngram` draft, or
their draft hook fed by the pair's draft as a GGUF file (a `specchat distill`
draft is exported on first use), with the file and thread count of the pair's
llama.cpp target (torch's thread count for a torch target).
Each arm answers from the same prompt ids, with the same sampling and token
budget, timed like `SpecchatArm`: the whole answer, prefill included.
`bench_arms` returns these after specchat's own arms for a llama.cpp pair (then llama.cpp's
own programs, bench/llama_programs.py, where they are built), and the transformers arms
(bench/arms.py) for a torch pair. Knows nothing about reports.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specchat.bench.arms import Arm, ArmRun, SpecchatArm, standard_arms
from specchat.engine import SamplingParams, Settings

if TYPE_CHECKING:
    from specchat.bench.llama_programs import Programs
    from specchat.chat.pair import Pair


class LlamaCppArm:
    """llama.cpp's own generate loop (with the bindings' speculation when given a drafter)."""

    def __init__(self, key: str, label: str, llm: Any, eos_ids: set[int], sampling: SamplingParams,
                 seed: int = 0, speculative: bool = False):
        self.key, self.label, self.llm = key, label, llm
        self.eos_ids, self.sampling, self.seed = set(eos_ids), sampling, seed
        self.speculative = speculative

    def run(self, prompt: list[int], max_new_tokens: int) -> ArmRun:
        from specchat.models.llamacpp.baselines import llama_generate

        started = time.perf_counter()
        tokens = llama_generate(self.llm, prompt, max_new_tokens, self.eos_ids, self.sampling,
                                self.seed)
        return ArmRun(tokens, time.perf_counter() - started)


GGUF_TARGETS = ("specchat.models.llamacpp.", "specchat.models.int8.")
"""Modules of the models that run a GGUF file (llama.cpp's, the int8 backend's)."""


def is_llamacpp_pair(pair: Pair) -> bool:
    """Whether the pair's target runs a GGUF file (on llama.cpp or the int8 backend): then
    llama.cpp's own decoding of that file is what a user could run instead."""
    return type(pair.target).__module__.startswith(GGUF_TARGETS)


def gguf_path(ref: str) -> Path | None:
    from specchat.models.gguf.drafts import gguf_file
    from specchat.models.config.refs import parse_ref

    return gguf_file(parse_ref(ref))


def llamacpp_arms(pair: Pair, settings: Settings, seed: int = 0,
                  threads: int | None = None) -> list[Arm]:
    """llama.cpp generate on the pair's target file, and llama.cpp speculation if offered."""
    import torch

    from specchat.errors import UsageError
    from specchat.models.llamacpp.baselines import open_llama

    target = getattr(pair.target, "path", None) or gguf_path(pair.config.target)
    if target is None:
        raise UsageError(f"pair '{pair.config.name}': target {pair.config.target} is not a GGUF "
                         "file, so llama.cpp cannot run it")
    threads = threads or getattr(pair.target, "threads", None) or torch.get_num_threads()
    sampling = settings.sampling
    placement = offload(pair)
    arms: list[Arm] = [LlamaCppArm("llama", "llama.cpp generate",
                                   open_llama(target, threads, **placement), pair.eos_ids,
                                   sampling, seed)]
    drafter, label = llamacpp_drafter(pair, max(settings.k, 1), threads)
    if drafter is not None:
        llm = open_llama(target, threads, draft_model=drafter, **placement)
        arms.append(LlamaCppArm("llama_spec", label, llm, pair.eos_ids, sampling, seed, True))
    return arms


def offload(pair: Pair) -> dict:
    """Where the bindings' arms put the layers: where specchat's own llama.cpp target has them
    (a CUDA or Metal build offloads them; the arms must not race a GPU from the CPU)."""
    return {"gpu_layers": getattr(pair.target, "gpu_layers", 0),
            "main_gpu": getattr(pair.target, "main_gpu", None)}


def llamacpp_drafter(pair: Pair, k: int, threads: int):
    """(the bindings' draft hook for the pair's drafter, its label), or (None, ""): also for
    a draft head, which llama.cpp's bindings cannot run (they hand out no hidden states)."""
    from specchat.models.adapters import is_head_ref
    from specchat.models.llamacpp.baselines import gguf_draft_model, prompt_lookup

    if hasattr(pair.draft, "max_ngram"):  # an n-gram lookup
        return prompt_lookup(k, pair.draft.max_ngram), "llama.cpp prompt lookup"
    if is_head_ref(pair.config.draft):
        return None, ""
    draft = gguf_path(pair.config.draft) if pair.config.draft else None
    if draft is None:
        return None, ""
    return gguf_draft_model(draft, k, threads, **offload(pair)), "llama.cpp draft (bindings' hook)"


def specchat_arms(pair: Pair, settings: Settings, seed: int = 0) -> list[Arm]:
    return [SpecchatArm("spec", "specchat speculative", pair, settings, True, seed),
            SpecchatArm("target", "specchat target-only", pair, settings, False, seed)]


def bench_arms(pair: Pair, settings: Settings, seed: int = 0,
               programs: Programs | None = None) -> list[Arm]:
    """specchat's arms and the baselines of the pair's backend (llama.cpp or transformers);
    for a llama.cpp pair also llama.cpp's own programs, where `programs` holds them."""
    if not is_llamacpp_pair(pair):
        return standard_arms(pair, settings, seed)
    arms = specchat_arms(pair, settings, seed) + llamacpp_arms(pair, settings, seed)
    if programs is None:
        return arms
    from specchat.bench.llama_programs import program_arms

    return arms + program_arms(pair, programs, program_setup(pair, seed), max(settings.k, 1))


def program_setup(pair: Pair, seed: int = 0):
    """The target file, threads, context and GPU layers of the pair's llama.cpp target, for
    llama.cpp's own programs."""
    from specchat.bench.llama_programs import Setup
    from specchat.models.llamacpp.model import MAX_CONTEXT

    target = pair.target
    path = getattr(target, "path", None) or gguf_path(pair.config.target)
    assert path is not None, "a llama.cpp target runs from a GGUF file"
    context = getattr(target, "context_length", None) or min(target.context_limit, MAX_CONTEXT)
    return Setup(Path(path), target.threads, context, seed,
                 getattr(target, "gpu_layers", 0), getattr(target, "main_gpu", None))
