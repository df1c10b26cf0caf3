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
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch

from specchat.bench.prompts import load_prompts, resolve_prompts_file
from specchat.bench.runner import prompt_ids
from specchat.engine.decoder import Decoder, Round, Settings
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
        run = 0
        while run < min(k, len(coming)) and start + run < len(context) and \
                context[start + run] == coming[run]:
            run += 1
        best = max(best, run)
    return best


def oracle_rounds(prompt: list[int], answer: list[int], k: int) -> int:
    rounds, done = 0, 0
    while done < len(answer):
        run = longest_lookup_run(prompt + answer[:done], answer[done:], k)
        done += run + 1
        rounds += 1
    return rounds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pair", default="smollm2-135m-ngram")
    parser.add_argument("--config", type=Path, default=None, help="a models.toml with more pairs")
    parser.add_argument("--category", default="extract")
    parser.add_argument("--prompts", type=Path, default=None, help="default: the packaged set")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("-k", type=int, default=12)
    args = parser.parse_args(argv)
    pair = load_pair(dataclasses.replace(load_catalog(args.config).get(args.pair), dtype="float32"))
    total_tokens = total_rounds = 0
    for item in load_prompts(resolve_prompts_file(args.prompts)):
        if args.category and item.category != args.category:
            continue
        prompt = prompt_ids(pair.tokenizer, item.prompt)
        answer = greedy_answer(pair, prompt, args.max_new_tokens)
        rounds = oracle_rounds(prompt, answer, args.k)
        total_tokens += len(answer)
        total_rounds += rounds
        print(json.dumps({"id": item.id, "tokens": len(answer), "oracle_rounds": rounds,
                          "tau_bound": round(len(answer) / rounds, 2),
                          "answer": pair.tokenizer.decode(answer)}))
    print(f"{args.category or 'all'}: {total_tokens} tokens in at least {total_rounds} rounds: "
          f"tau <= {total_tokens / max(1, total_rounds):.2f}")


if __name__ == "__main__":
    with torch.inference_mode():
        main()
