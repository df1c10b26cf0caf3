"""The benchmarks behind `specchat bench run | sweep | profile | overhead | synthetic`:
each loads what it needs, measures, and returns its typed report (bench.reports).

Progress is reported through callbacks (a note per loading step, one call per
prompt answered by every arm), so this module knows nothing about terminals or
click. The arms come from bench.arms, the decoders from chat.decoding.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from specchat.bench.prompts import BenchPrompt
from specchat.bench.reports import (ComparisonReport, OverheadReport, RunMeta, SweepReport,
                                    SyntheticReport)
from specchat.bench.runner import PromptResult, longest_sequence
from specchat.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path
    from specchat.bench.arms import Arm
    from specchat.bench.llama_programs import Programs
    from specchat.chat.pair import Pair
    from specchat.models.config.pairs import PairConfig

Note = Callable[[str], None]
OnPrompt = Callable[[PromptResult], None]
KeepGoing = Callable[[], bool]
"""Asked before each prompt after the first: False ends a run early (`bench --budget-s`)."""


def load(pair_config: PairConfig, dtype: str | None, note: Note,
         prompts: Sequence[BenchPrompt] = (), max_new_tokens: int = 0):
    """The pair, loaded and (for a static cache) with every step shape captured before timing:
    every width at every attention span the prompts' answers reach (all spans without
    prompts). On a GPU each span costs a capture of every width for each model; the first GPU
    run captured every span up to 4,096 tokens for answers that stayed under 512, and its
    loading and capturing took most of the `bench run` step's 50 s (how much of it the
    spans took was not timed apart)."""
    from specchat.models.torch_backend.baselines import quiet_generation_warnings
    from specchat.models.loader import load_pair

    pair = load_pair(pair_config, dtype=dtype, progress=note)
    quiet_generation_warnings()
    longest = longest_sequence(pair.tokenizer, prompts, max_new_tokens) if prompts else None
    for model in (pair.target, pair.draft_model):
        prepare = getattr(model, "prepare", None)
        if prepare is not None:
            note(f"capturing steps of {type(model).__name__}")
            prepare(longest=longest)
    return pair


def run_comparison(pair: Pair, prompts: Sequence[BenchPrompt], path: Path, max_new_tokens: int,
                   seed: int, on_prompt: OnPrompt, repeats: int = 1,
                   programs: Programs | None = None,
                   keep_going: KeepGoing = lambda: True) -> ComparisonReport:
    """`bench run`: the pair's arms (speculative, target-only, transformers or llama.cpp, and
    llama.cpp's own programs where `programs` has them) on every prompt."""
    from specchat.bench.comparison import comparison_arms
    from specchat.engine.adaptive import settings_for

    arms = comparison_arms(pair, settings_for(pair.config.k, pair.config.sampling), seed,
                           programs)
    meta, tables, _ = measure(pair, arms, prompts, path, max_new_tokens, on_prompt, repeats,
                              keep_going)
    return ComparisonReport(meta, tables)


def run_sweep(pair: Pair, prompts: Sequence[BenchPrompt], path: Path, max_new_tokens: int,
              seed: int, ks: list[int], on_prompt: OnPrompt, profile: bool = False,
              note: Note = lambda _: None, repeats: int = 1,
              programs: Programs | None = None,
              keep_going: KeepGoing = lambda: True) -> SweepReport:
    """`bench sweep` (and `bench profile`): fixed k, k = auto, transformers' heuristic, and
    llama.cpp's own speculation at every fixed k where `programs` has it."""
    from specchat.bench.arms import sweep_arms
    from specchat.bench.sweep import sweep_section

    if not pair.has_draft:
        raise UsageError(f"pair '{pair.config.name}' has no draft: bench sweep and profile need one")
    arms = sweep_arms(pair, pair.config.sampling, ks, seed)
    if programs is not None:
        from specchat.bench.llama_programs import sweep_program_arms
        from specchat.bench.llamacpp_arms import is_llamacpp_pair, program_setup

        if is_llamacpp_pair(pair):
            arms += sweep_program_arms(pair, programs, program_setup(pair, seed), ks)
    meta, tables, results = measure(pair, arms, prompts, path, max_new_tokens, on_prompt, repeats,
                                    keep_going)
    report = SweepReport(meta, tables, sweep_section(tables),
                         k_histogram(r.runs["auto"].ks for r in results))
    if profile:
        from specchat.bench.profile import measure_costs, profile_report
        from specchat.bench.runner import prompt_ids

        note("measuring step costs")
        costs = measure_costs(pair, prompt_ids(pair.tokenizer, prompts[0].prompt))
        report.profile = profile_report(results, ks, costs)
    return report


def run_overhead(pair: Pair, prompts: Sequence[BenchPrompt], path: Path,
                 max_new_tokens: int) -> OverheadReport:
    """`bench overhead`: time outside model forwards, speculative and target-only."""
    from specchat.bench.overhead import measure_overhead, profiler_table
    from specchat.bench.runner import prompt_ids
    from specchat.engine.adaptive import settings_for

    settings = settings_for(pair.config.k, pair.config.sampling)
    encoded = [prompt_ids(pair.tokenizer, p.prompt) for p in prompts]
    measure_overhead(pair, settings, encoded[:1], 8)  # warm-up
    return OverheadReport(
        run_meta(pair, path, max_new_tokens, len(prompts)),
        measure_overhead(pair, settings, encoded, max_new_tokens).as_dict(),
        measure_overhead(pair, settings, encoded, max_new_tokens, False).as_dict(),
        profiler_table(pair, settings, encoded[0], max_new_tokens))


def run_synthetic(sizes: str, dtype: str | None, layers: int | None) -> SyntheticReport:
    """`bench synthetic`: random-weight models of real Llama shapes (2 layers on a CPU)."""
    from specchat.bench.synthetic import profile_synthetic
    from specchat.models.device.hardware import resolve_device, resolve_dtype

    device, _ = resolve_device("auto")
    torch_dtype, _ = resolve_dtype(dtype or "auto", device)
    if layers is None and not device.startswith("cuda"):
        layers = 2
    names = [name.strip().lower() for name in sizes.split(",") if name.strip()]
    result = profile_synthetic(names, device, torch_dtype, layers)
    result["device"] = device_name(device)
    return SyntheticReport(result)


def measure(pair: Pair, arms: Sequence[Arm], prompts: Sequence[BenchPrompt], path: Path,
            max_new_tokens: int, on_prompt: OnPrompt, repeats: int = 1,
            keep_going: KeepGoing = lambda: True) -> tuple[RunMeta, dict, list[PromptResult]]:
    from specchat.bench.tables import build_tables
    from specchat.bench.runner import run_prompts

    results = run_prompts(arms, pair.tokenizer, prompts, max_new_tokens, on_prompt, repeats,
                          keep_going)
    tables = build_tables({a.key: a.label for a in arms}, results,
                          greedy=pair.config.sampling.greedy)
    meta = dataclasses.replace(run_meta(pair, path, max_new_tokens, len(results)),
                               repeats=repeats, prompts_left=len(prompts) - len(results))
    return meta, tables, results


def k_histogram(ks_per_answer: Iterable[Sequence[int]]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for ks in ks_per_answer:
        for k in ks:
            counts[k] = counts.get(k, 0) + 1
    return dict(sorted(counts.items()))


def run_meta(pair: Pair, path: Path, max_new_tokens: int, prompts: int) -> RunMeta:
    import torch

    config = pair.config
    return RunMeta("specchat " + shlex.join(sys.argv[1:]), config.name, config.target,
                   config.draft or "none", config.k, shown_device(pair), pair.dtype,
                   adapter_description(pair.target), torch.get_num_threads(), max_new_tokens,
                   config.sampling.temperature, config.sampling.top_p, config.sampling.top_k,
                   str(path), prompts,
                   dict(getattr(pair, "backends", {}) or {}), cpu_flags=vector_flags())


def vector_flags() -> str:
    """The CPU's SIMD flags of interest, space-separated ("" where /proc/cpuinfo is absent)."""
    from specchat.models.device.hardware import cpu_flags

    wanted = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni",
              "amx_bf16", "amx_int8", "neon", "asimd")
    return " ".join(flag for flag in wanted if flag in cpu_flags())


def adapter_description(model: Any) -> str:
    """Which KV cache path decoded: eager DynamicCache, or the static cache and its capture."""
    name = type(model).__name__
    if not hasattr(model, "compiled"):
        return name
    return f"{name} ({'CUDA graphs: ' + model.capture if model.compiled else 'not captured'})"


def shown_device(pair: Pair) -> str:
    """The device the target computes on, with the GPU's name (a llama.cpp target offloaded to
    CUDA keeps its logits, and so `pair.device`, on the CPU)."""
    gpu = getattr(pair, "offloaded_to", None)
    if gpu == "CUDA":
        return f"{device_name('cuda')}, llama.cpp"
    return pair.device_label if gpu else device_name(pair.device)


def device_name(device: str) -> str:
    import platform

    import torch

    if device.startswith("cuda"):
        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
