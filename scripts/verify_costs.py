"""Verify cost v(n) and break-even acceptance on torch and llama.cpp, side by side.

    .venv/bin/python scripts/verify_costs.py [--pair smollm2-135m] [--threads 2]
        [--context 200] [--repeats 5] [--prompts FILE.jsonl] [--json]

For the pair's target (which must be a GGUF file for the llama.cpp column): the
time of one forward of n tokens (every fixed k's n = k + 1, engine.costs.WIDTHS)
with logits for all n after a context of real text, over a 1-token step, on specchat's torch forward (bench/profile.py)
and on llama.cpp (bench/llamacpp_profile.py, same file, same threads); each
backend's draft step cost c (the pair's draft: on llama.cpp its GGUF form, built
on first use for a `specchat distill` draft); and the break-even α for k = 1..4.
Run it on a quiet machine: the numbers are timings.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path


def context_ids(tokenizer, count: int, prompts: Path | None) -> list[int]:
    from specchat.bench.prompts import load_prompts, resolve_prompts_file
    from specchat.engine.costs import filler_ids

    texts = [p.prompt for p in load_prompts(resolve_prompts_file(prompts))]
    return filler_ids(tokenizer.encode("\n\n".join(texts)), count)


def torch_report(pair, context: list[int], repeats: int) -> dict:
    from specchat.bench.llamacpp_profile import cost_report
    from specchat.bench.profile import measure_costs

    return cost_report(measure_costs(pair, context, repeats))


def llamacpp_report(pair, context: list[int], threads: int, repeats: int) -> dict:
    from specchat.bench.llamacpp_arms import gguf_path
    from specchat.bench.llamacpp_profile import cost_report, llamacpp_costs
    from specchat.chat.decoding import drafter_for
    from specchat.engine import NgramDrafter

    drafter = drafter_for(pair)
    target = gguf_path(pair.config.target)
    if target is None:
        raise SystemExit(f"{pair.config.target} is not a GGUF file: no llama.cpp column")
    ngram = isinstance(drafter, NgramDrafter)
    draft = gguf_path(pair.config.draft) if pair.config.draft and not ngram else None
    return cost_report(llamacpp_costs(target, context, threads, draft,
                                      drafter if ngram else None, repeats=repeats))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", default=None, help="pair name (default: the default pair)")
    parser.add_argument("--config", type=Path, default=None, help="a models.toml with more pairs")
    parser.add_argument("--threads", type=int, default=None, help="threads for both backends")
    parser.add_argument("--context", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--prompts", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import torch

    from specchat.bench.llamacpp_profile import cost_table
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    if args.threads:
        torch.set_num_threads(args.threads)
    config = load_catalog(args.config).get(args.pair)
    if hasattr(config, "backend"):  # the torch column must run on torch whatever auto picks
        config = dataclasses.replace(config, backend="torch")
    pair = load_pair(config)
    context = context_ids(pair.tokenizer, args.context, args.prompts)
    reports = {f"torch {pair.dtype}": torch_report(pair, context, args.repeats),
               "llama.cpp": llamacpp_report(pair, context, torch.get_num_threads(), args.repeats)}
    print(json.dumps(reports, indent=1) if args.json else cost_table(reports, len(context)))


if __name__ == "__main__":
    main()
