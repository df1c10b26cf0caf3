"""Measure a pair's greedy draft acceptance and speculative vs target-only tokens/s.

    PYTHONPATH=. python docs/measure_draft.py --pair smollm2-135m --dtype bfloat16 \
        --prompts ../shared/eval/prompts.jsonl --max-new-tokens 96

Each prompt is answered speculatively and target-only, alternating, in one
process (same models, same settings), so the ratio is measured within one run
on a noisy machine. A stopgap until `specchat bench` is on main.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections import defaultdict

from specchat.chat.events import AnswerDone
from specchat.chat.session import ChatSession
from specchat.models.config.pairs import load_catalog
from specchat.models.loader import load_pair


def answer(pair, prompt: str, speculate: bool, max_new_tokens: int):
    session = ChatSession(pair)
    session.speculate = speculate
    return [e for e in session.answer(prompt, max_new_tokens) if isinstance(e, AnswerDone)][0].stats


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pair", default=None)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--prompts", default="../shared/eval/prompts.jsonl")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("-k", type=int, default=None, help="override the pair's k")
    parser.add_argument("--every", type=int, default=1, help="use every n-th prompt only")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    config = load_catalog().get(args.pair)
    if args.k is not None:
        config = dataclasses.replace(config, k=args.k)
    pair = load_pair(config, dtype=args.dtype)
    rows = [json.loads(line) for line in open(args.prompts) if line.strip()][::args.every]
    totals = defaultdict(lambda: defaultdict(float))
    answer(pair, "Hello!", True, 8)  # warm-up
    for row in rows:
        spec = answer(pair, row["prompt"], True, args.max_new_tokens)
        plain = answer(pair, row["prompt"], False, args.max_new_tokens)
        for key in (row["category"], "all"):
            t = totals[key]
            t["drafted"] += spec.drafted
            t["accepted"] += spec.accepted
            t["spec_tokens"] += spec.tokens
            t["spec_s"] += spec.elapsed_s
            t["plain_tokens"] += plain.tokens
            t["plain_s"] += plain.elapsed_s
        print(json.dumps({"id": row["id"], "acceptance": spec.acceptance_rate,
                          "spec_tok_s": spec.tokens_per_s, "plain_tok_s": plain.tokens_per_s}),
              flush=True)
    for key, t in totals.items():
        spec_rate, plain_rate = t["spec_tokens"] / t["spec_s"], t["plain_tokens"] / t["plain_s"]
        print(f"{key:<9} acceptance {t['accepted'] / max(1, t['drafted']):.3f}  "
              f"spec {spec_rate:.1f} tok/s  plain {plain_rate:.1f} tok/s  "
              f"speedup {spec_rate / plain_rate:.2f}x")


if __name__ == "__main__":
    main()
