"""`specchat bench`: specchat vs transformers on the same models and prompts.

Arms, alternating in order within one run: specchat speculative, specchat
target-only, transformers `generate`, and transformers' own speculation. Prints
tables (or the report as JSON with --json); progress goes to stderr.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from specchat.commands.options import (apply_overrides, dtype_option, k_option,
                                       load_pair_config, pair_option, temperature_option)


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
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="torch CPU threads (default: torch's choice; 1 is steadier on a busy machine).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False))
@click.pass_context
def bench(ctx, pair_name, prompts_file, max_new_tokens, temperature, dtype, k, seed,
          categories, limit, threads, as_json, config_file):
    """Benchmark a pair: specchat vs transformers, per prompt, category and in total."""
    from specchat.bench.prompts import load_prompts, resolve_prompts_file

    if threads:
        import torch

        torch.set_num_threads(threads)
    config = config_file or (ctx.obj or {}).get("config")
    pair_config = apply_overrides(load_pair_config(config, pair_name), k, temperature)
    path = resolve_prompts_file(prompts_file)
    prompts = select(load_prompts(path), categories, limit, path)
    report = run_standard(pair_config, prompts, path, max_new_tokens, dtype, seed)
    print_report(report, as_json)


def select(prompts, categories, limit, path):
    from specchat.errors import UsageError

    if categories:
        prompts = [p for p in prompts if p.category in categories]
        if not prompts:
            raise UsageError(f"{path}: no prompt has category {', '.join(categories)}")
    return prompts[:limit] if limit else prompts


def run_standard(pair_config, prompts, path, max_new_tokens, dtype, seed) -> dict:
    from specchat.bench.arms import standard_arms
    from specchat.bench.report import build_report
    from specchat.bench.runner import run_prompts
    from specchat.engine import SamplingParams, Settings
    from specchat.models.baselines import quiet_generation_warnings
    from specchat.models.loader import load_pair

    pair = load_pair(pair_config, dtype=dtype, progress=lambda m: click.echo(m, err=True))
    quiet_generation_warnings()
    sampling = SamplingParams(pair_config.temperature, pair_config.top_k, pair_config.top_p)
    arms = standard_arms(pair, Settings(pair_config.k, sampling), seed)
    results = run_prompts(arms, pair.tokenizer, prompts, max_new_tokens, progress_line)
    meta = run_meta(pair, path, max_new_tokens, len(prompts))
    return build_report(meta, {a.key: a.label for a in arms}, results,
                        greedy=pair_config.temperature == 0)


def run_meta(pair, path, max_new_tokens: int, prompts: int) -> dict:
    import torch

    config = pair.config
    return {"command": "specchat " + shlex.join(sys.argv[1:]), "pair": config.name,
            "target": config.target, "draft": config.draft or "none", "k": config.k,
            "device": device_name(pair.device), "dtype": pair.dtype,
            "torch_threads": torch.get_num_threads(), "max_new_tokens": max_new_tokens,
            "temperature": config.temperature, "top_p": config.top_p, "top_k": config.top_k,
            "prompts_file": str(path), "prompt_count": prompts}


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

    click.echo(format_report(report))
