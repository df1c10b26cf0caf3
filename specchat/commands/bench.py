"""`specchat bench`: specchat vs transformers on the same models and prompts.

Default arms, alternating in order within one run: specchat speculative, specchat
target-only, transformers `generate`, and transformers' own speculation; for a
llama.cpp pair, llama.cpp's own generate loop and speculation instead
(bench/llamacpp_arms.py `bench_arms`).
`--k-sweep` compares fixed k, k = "auto" and transformers' heuristic schedule;
`--profile` adds the measured cost model (c, v(n), α, ideal vs measured speedup);
`--synthetic 1b,8b` profiles random-weight models of real Llama shapes. Tables go
to stdout (or one JSON object with --json); progress goes to stderr.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from specchat.commands.options import (apply_overrides, dtype_option, k_option,
                                       load_pair_config, pair_option, temperature_option)
from specchat.errors import UsageError

PROFILE_KS = "1,2,3,4,5,6,7,8"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@pair_option
@click.option("--prompts", "prompts_file", type=click.Path(path_type=Path, dir_okay=False),
              default=None, help="JSONL prompt set (default: ../shared/eval/prompts.jsonl).")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=96, show_default=True)
@temperature_option
@dtype_option
@k_option
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for sampling.")
@click.option("--category", "categories", multiple=True, metavar="NAME",
              help="Only prompts of this category (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N prompts.")
@click.option("--k-sweep", default=None, metavar="LIST",
              help="Compare fixed k (e.g. 2,3,4,5,6,7,8) with k=auto and transformers' heuristic.")
@click.option("--profile", is_flag=True,
              help=f"Cost model: c, verify cost of 1..16 tokens, ideal vs measured speedup "
                   f"(k = {PROFILE_KS} unless --k-sweep).")
@click.option("--overhead", is_flag=True,
              help="Share of each round spent outside model forwards (timed forwards + torch.profiler).")
@click.option("--synthetic", default=None, metavar="SIZES",
              help="Verify cost vs tokens on random models of real Llama shapes, e.g. 1b,8b.")
@click.option("--synthetic-layers", type=click.IntRange(min=1), default=None,
              help="Layers per synthetic model (default: all on CUDA, 2 on CPU).")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="torch CPU threads (default: torch's choice; 1 is steadier on a busy machine).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False),
              help="A models.toml whose pairs win over the user's and the built-in ones.")
@click.pass_context
def bench(ctx, pair_name, prompts_file, max_new_tokens, temperature, dtype, k, seed,
          categories, limit, k_sweep, profile, overhead, synthetic, synthetic_layers, threads, as_json,
          config_file):
    """Benchmark a pair: specchat vs transformers, per prompt, category and in total."""
    if threads:
        import torch

        torch.set_num_threads(threads)
    if synthetic:
        return print_synthetic(synthetic, dtype, synthetic_layers, as_json)
    from specchat.bench.prompts import load_prompts, resolve_prompts_file

    config = config_file or (ctx.obj or {}).get("config")
    pair_config = apply_overrides(load_pair_config(config, pair_name), k, temperature)
    path = resolve_prompts_file(prompts_file)
    prompts = select(load_prompts(path), categories, limit, path)
    ks = parse_ks(k_sweep or (PROFILE_KS if profile else None))
    if overhead:
        report = run_overhead(pair_config, prompts, path, max_new_tokens, dtype)
    elif ks:
        report = run_sweep(pair_config, prompts, path, max_new_tokens, dtype, seed, ks, profile)
    else:
        report = run_standard(pair_config, prompts, path, max_new_tokens, dtype, seed)
    print_report(report, as_json)


def parse_ks(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise UsageError(f"--k-sweep must list whole numbers like 2,3,4 (got {text!r})") from None
    if not ks or ks[0] < 1:
        raise UsageError(f"--k-sweep needs draft lengths of 1 or more (got {text!r})")
    return ks


def select(prompts, categories, limit, path):
    if categories:
        prompts = [p for p in prompts if p.category in categories]
        if not prompts:
            raise UsageError(f"{path}: no prompt has category {', '.join(categories)}")
    return prompts[:limit] if limit else prompts


def load(pair_config, dtype):
    from specchat.models.baselines import quiet_generation_warnings
    from specchat.models.loader import load_pair

    pair = load_pair(pair_config, dtype=dtype, progress=lambda m: click.echo(m, err=True))
    quiet_generation_warnings()
    for model in (pair.target, pair.draft_model):
        if hasattr(model, "prepare"):  # static cache: capture every step shape before timing
            click.echo(f"capturing steps of {type(model).__name__}", err=True)
            model.prepare()
    return pair


def sampling_of(pair_config):
    from specchat.engine import SamplingParams

    return SamplingParams(pair_config.temperature, pair_config.top_k, pair_config.top_p)


def run_standard(pair_config, prompts, path, max_new_tokens, dtype, seed) -> dict:
    from specchat.bench.llamacpp_arms import bench_arms
    from specchat.engine.adaptive import settings_for

    pair = load(pair_config, dtype)
    arms = bench_arms(pair, settings_for(pair_config.k, sampling_of(pair_config)), seed)
    report, _ = measure(pair, arms, prompts, path, max_new_tokens)
    return report


def run_sweep(pair_config, prompts, path, max_new_tokens, dtype, seed, ks, profile) -> dict:
    from specchat.bench.arms import sweep_arms
    from specchat.bench.sweep import add_sweep

    pair = load(pair_config, dtype)
    if pair.drafter is None:
        raise UsageError(f"pair '{pair_config.name}' has no draft: --k-sweep and --profile need one")
    arms = sweep_arms(pair, sampling_of(pair_config), ks, seed)
    report, results = measure(pair, arms, prompts, path, max_new_tokens)
    add_sweep(report)
    report["auto_k_histogram"] = k_histogram(r.runs["auto"].ks for r in results)
    if profile:
        from specchat.bench.profile import measure_costs, profile_report
        from specchat.bench.runner import prompt_ids

        click.echo("measuring step costs", err=True)
        costs = measure_costs(pair, prompt_ids(pair.tokenizer, prompts[0].prompt))
        report["profile"] = profile_report(results, ks, costs)
    return report


def run_overhead(pair_config, prompts, path, max_new_tokens, dtype) -> dict:
    from specchat.bench.overhead import measure_overhead, profiler_table
    from specchat.bench.runner import prompt_ids
    from specchat.engine.adaptive import settings_for

    pair = load(pair_config, dtype)
    settings = settings_for(pair_config.k, sampling_of(pair_config))
    encoded = [prompt_ids(pair.tokenizer, p.prompt) for p in prompts]
    measure_overhead(pair, settings, encoded[:1], 8)  # warm-up
    report = run_meta(pair, path, max_new_tokens, len(prompts))
    report["overhead"] = {
        "speculative": measure_overhead(pair, settings, encoded, max_new_tokens).as_dict(),
        "target_only": measure_overhead(pair, settings, encoded, max_new_tokens, False).as_dict()}
    report["profiler_table"] = profiler_table(pair, settings, encoded[0], max_new_tokens)
    return report


def format_overhead(report: dict) -> str:
    lines = ["time outside model forwards (wall time of the answers minus time inside forwards):"]
    for mode, r in report["overhead"].items():
        lines.append(f"  {mode:<12} {r['rounds']} rounds, {r['tokens']} tokens, "
                     f"{r['ms_per_round']:.2f} ms/round of which forwards {r['forward_ms_per_round']:.2f}"
                     f" ms: outside = {100 * (r['outside_forward_share'] or 0):.1f}%")
    return "\n".join(lines) + "\n\ntorch.profiler, one speculative answer:\n" + report["profiler_table"]


def k_histogram(ks_per_answer) -> dict[int, int]:
    counts: dict[int, int] = {}
    for ks in ks_per_answer:
        for k in ks:
            counts[k] = counts.get(k, 0) + 1
    return dict(sorted(counts.items()))


def measure(pair, arms, prompts, path, max_new_tokens):
    from specchat.bench.report import build_report
    from specchat.bench.runner import run_prompts

    results = run_prompts(arms, pair.tokenizer, prompts, max_new_tokens, progress_line)
    meta = run_meta(pair, path, max_new_tokens, len(prompts))
    report = build_report(meta, {a.key: a.label for a in arms}, results,
                          greedy=pair.config.temperature == 0)
    return report, results


def run_meta(pair, path, max_new_tokens: int, prompts: int) -> dict:
    import torch

    config = pair.config
    return {"command": "specchat " + shlex.join(sys.argv[1:]), "pair": config.name,
            "target": config.target, "draft": config.draft or "none", "k": config.k,
            "device": device_name(pair.device), "dtype": pair.dtype,
            "adapter": adapter_description(pair.target),
            "torch_threads": torch.get_num_threads(), "max_new_tokens": max_new_tokens,
            "temperature": config.temperature, "top_p": config.top_p, "top_k": config.top_k,
            "prompts_file": str(path), "prompt_count": prompts}


def adapter_description(model) -> str:
    """Which KV cache path decoded: eager DynamicCache, or the static cache and its capture."""
    name = type(model).__name__
    if not hasattr(model, "compiled"):
        return name
    from specchat.models.static import compile_mode

    return f"{name} ({'CUDA graphs: ' + compile_mode() if model.compiled else 'not captured'})"


def device_name(device: str) -> str:
    import platform

    import torch

    if device.startswith("cuda"):
        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def progress_line(result) -> None:
    rates = "  ".join(f"{key} {run.tokens_per_s:.1f}" for key, run in result.runs.items())
    click.echo(f"[{result.prompt.id}] tokens/s: {rates}", err=True)


def print_report(report: dict, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report, indent=1))
        return
    from specchat.bench.format import format_report

    if "overhead" in report:
        click.echo(format_overhead(report))
        return
    if "sweep" not in report:
        click.echo(format_report(report))
        return
    from specchat.bench.format import header_lines
    from specchat.bench.sweep import format_sweep

    click.echo("\n".join(header_lines(report)) + "\n")
    click.echo(format_sweep(report))
    if "profile" in report:
        from specchat.bench.profile import format_profile

        click.echo("\n" + format_profile(report["profile"]))


def print_synthetic(sizes: str, dtype: str | None, layers: int | None, as_json: bool) -> None:
    import torch

    from specchat.bench.synthetic import format_synthetic, profile_synthetic
    from specchat.models.hardware import resolve_device, resolve_dtype

    device, _ = resolve_device("auto")
    torch_dtype, _ = resolve_dtype(dtype or "auto", device)
    if layers is None and not device.startswith("cuda"):
        layers = 2
    names = [name.strip().lower() for name in sizes.split(",") if name.strip()]
    result = profile_synthetic(names, device, torch_dtype, layers)
    result["device"] = device_name(device)
    click.echo(json.dumps(result, indent=1) if as_json else format_synthetic(result))
