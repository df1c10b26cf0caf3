"""Paired A/B: specchat target-only vs transformers `generate` on one prompt,
alternating which goes first, with the arms `specchat bench` uses. On a noisy
machine this separates the loop's own cost from drift between runs.

usage: python scripts/ab_target_vs_generate.py [--pair P] [--dtype D] [--prompt-index I]
       [--tokens N] [--repeats R] [--threads T]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pair", default="smollm2-135m-ngram")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--prompt-index", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from specchat.bench.arms import standard_arms
    from specchat.bench.prompts import load_prompts, resolve_prompts_file
    from specchat.bench.runner import prompt_ids
    from specchat.engine import SamplingParams, Settings
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    pair = load_pair(load_catalog().get(args.pair), dtype=args.dtype)
    arms = {a.key: a for a in standard_arms(pair, Settings(0, SamplingParams()))}
    prompt = load_prompts(resolve_prompts_file(None))[args.prompt_index]
    ids = prompt_ids(pair.tokenizer, prompt.prompt)
    forwards: list[int] = []
    pair.target.model.register_forward_pre_hook(lambda *_: forwards.append(1))
    for key in ("target", "hf"):
        arms[key].run(ids, 8)  # warm-up
    ms: dict[str, list[float]] = {"target": [], "hf": []}
    for i in range(args.repeats):
        for key in ("target", "hf") if i % 2 == 0 else ("hf", "target"):
            forwards.clear()
            run = arms[key].run(ids, args.tokens)
            ms[key].append(1000 * run.seconds / len(run.tokens))
            print(f"{key:<6} {len(run.tokens)} tokens, {len(forwards)} forwards, {run.seconds:.3f} s")
    print(json.dumps({"prompt": prompt.id, "dtype": args.dtype,
                      "median_ms_per_token": {k: round(statistics.median(v), 2) for k, v in ms.items()}}))


if __name__ == "__main__":
    main()
