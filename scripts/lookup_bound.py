"""Upper bound on what any prompt-lookup drafter can gain on a prompt set.

    .venv/bin/python scripts/lookup_bound.py --pair smollm2-135m-ngram --category extract \
        [--prompts FILE.jsonl] [--config models.toml] --max-new-tokens 96

Answers each prompt greedily, target-only, in float32, then replays the answer
with an oracle lookup drafter: in every round it proposes the longest run of the
coming answer tokens (at most k) that follows *any* earlier occurrence of the
sequence's last n tokens, for any n >= 1 — no real n-gram drafter can do better.
Each round commits that run plus one target token, so tokens / rounds (tau) is
the most a round can yield; with a verify no cheaper than one decoding step and
prefill ignored, tau also bounds the speedup over target-only decoding.

Where a verify of n tokens costs v(n) > 1 plain steps (a CPU), the bound is tighter:
tokens / Σ v(run + 1) over the oracle's rounds.

A second, tighter bound keeps specchat's own lookup (engine/drafters.py `find_match`: the
most recent match of the longest suffix of the pair's n-gram sizes) and makes only its
proposal length perfect: every round proposes exactly the tokens of that match that will
hold. No way of choosing proposal lengths (a window, k = "auto") can beat it with this
drafter's matches (`drafter_*` in each row). `--measure` times v(n) on the pair's
target (engine/costs.py, as `pairs --check --measure` does); `--v 1,1.85,2.52` gives it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch

from specchat.bench.prompts import load_prompts, resolve_prompts_file
from specchat.bench.runner import prompt_ids
from specchat.engine.costs import Costs
from specchat.engine.decoder import Decoder, Round, Settings
from specchat.engine.drafters import find_match
from specchat.models.config.pairs import load_catalog
from specchat.models.loader import load_pair


def greedy_answer(pair, prompt: list[int], max_new_tokens: int) -> list[int]:
    decoder = Decoder(pair.target, None, pair.eos_ids)
    return [t for e in decoder.generate(prompt, Settings(k=0), max_new_tokens)
            if isinstance(e, Round) for t in e.committed]


def longest_lookup_run(context: list[int], coming: list[int], k: int) -> int:
    """Most coming tokens that follow an earlier occurrence of some suffix of context."""
    best = 0
    for start in range(1, len(context)):  # context[start:] would be proposed after context[:start]
        if context[start - 1] != context[-1]:
            continue  # no suffix (n >= 1) of the context ends at start - 1
        best = max(best, matched_run(context, start, coming, k))
    return best


def oracle_runs(prompt: list[int], answer: list[int], k: int) -> list[int]:
    """The drafts the oracle has accepted in each round of the answer."""
    runs, done = [], 0
    while done < len(answer):
        run = longest_lookup_run(prompt + answer[:done], answer[done:], k)
        done += run + 1
        runs.append(run)
    return runs


def matched_run(context: list[int], start: int, coming: list[int], k: int) -> int:
    """How many coming tokens the text after `context[start]` predicts, at most k."""
    run = 0
    while run < min(k, len(coming)) and start + run < len(context) and \
            context[start + run] == coming[run]:
        run += 1
    return run


def drafter_runs(prompt: list[int], answer: list[int], k: int, max_ngram: int,
                 min_ngram: int) -> list[int]:
    """The drafts specchat's lookup has accepted in each round of the answer had it proposed
    exactly the part of its match that holds (nothing where that part is empty)."""
    runs, done = [], 0
    while done < len(answer):
        context = prompt + answer[:done]
        match = find_match(context, max_ngram, min_ngram)
        run = matched_run(context, match.start, answer[done:], k) if match else 0
        done += run + 1
        runs.append(run)
    return runs


def oracle_rounds(prompt: list[int], answer: list[int], k: int) -> int:
    return len(oracle_runs(prompt, answer, k))


def speedup_bound(runs: list[int], costs: Costs) -> float:
    """Target-only time over the oracle's: each round verifies its run plus one token."""
    return sum(run + 1 for run in runs) / sum(costs.v(run + 1) for run in runs)


def given_costs(text: str) -> Costs:
    """v(1), v(2), ... as written on the command line (plain steps of 1 second)."""
    return Costs.of({n: float(v) for n, v in enumerate(text.split(","), start=1)}, 0.0)


def measured_costs(pair) -> Costs:
    from specchat.chat.baseline_timing import measure_baseline_costs

    return measure_baseline_costs(pair, repeats=5)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pair", default="smollm2-135m-ngram")
    parser.add_argument("--config", type=Path, default=None, help="a models.toml with more pairs")
    parser.add_argument("--category", default="extract")
    parser.add_argument("--prompts", type=Path, default=None, help="default: the packaged set")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("-k", type=int, default=12)
    parser.add_argument("--v", default=None, help="v(1),v(2),...: verify costs in plain steps")
    parser.add_argument("--measure", action="store_true", help="time v(n) on the pair's target")
    args = parser.parse_args(argv)
    pair = load_pair(dataclasses.replace(load_catalog(args.config).get(args.pair), dtype="float32"))
    costs = measured_costs(pair) if args.measure else given_costs(args.v) if args.v else None
    if costs is not None:
        print(json.dumps({"v": {n: round(costs.v(n), 3) for n in costs.widths}}))
    total_tokens = total_rounds = 0
    all_runs: list[int] = []
    all_drafter_runs: list[int] = []
    lookup = pair.draft
    for item in load_prompts(resolve_prompts_file(args.prompts)):
        if args.category and item.category != args.category:
            continue
        prompt = prompt_ids(pair.tokenizer, item.prompt)
        answer = greedy_answer(pair, prompt, args.max_new_tokens)
        runs = oracle_runs(prompt, answer, args.k)
        drafted = drafter_runs(prompt, answer, args.k, lookup.max_ngram, lookup.min_ngram)
        total_tokens += len(answer)
        total_rounds += len(runs)
        all_runs += runs
        all_drafter_runs += drafted
        row = {"id": item.id, "tokens": len(answer), "oracle_rounds": len(runs),
               "tau_bound": round(len(answer) / len(runs), 2), "drafter_rounds": len(drafted)}
        if costs is not None:
            row["speedup_bound"] = round(speedup_bound(runs, costs), 3)
            row["drafter_speedup_bound"] = round(speedup_bound(drafted, costs), 3)
        print(json.dumps(row | {"answer": pair.tokenizer.decode(answer)}))
    summary = (f"{args.category or 'all'}: {total_tokens} tokens in at least {total_rounds} rounds: "
               f"tau <= {total_tokens / max(1, total_rounds):.2f}")
    if costs is not None and all_runs:
        summary += (f"; speedup over target-only <= {speedup_bound(all_runs, costs):.2f}x at these "
                    f"v(n); specchat's lookup with perfect proposal lengths "
                    f"<= {speedup_bound(all_drafter_runs, costs):.2f}x")
    print(summary)


if __name__ == "__main__":
    with torch.inference_mode():
        main()
