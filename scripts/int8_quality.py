"""What the int8 backend's rounding costs: teacher-forced top-1 agreement with the float model.

    .venv/bin/python scripts/int8_quality.py --target builtin:qwen2.5-coder-1.5b-instruct \
        [--prompts FILE.jsonl] [--max-new-tokens 64] [--out results/.../quality.json]

The reference is the GGUF file de-quantized to float32 and run by transformers (the torch
backend's own conversion, `backend = "torch"`, dtype float32). It answers each prompt
greedily; then every backend reads prompt + answer in one forward (teacher forcing) and
the answer's positions are compared: how often each backend's argmax is the reference's.
Compared: the int8 backend (int8 rows from the GGUF, 8- or 7-bit activations) and
llama.cpp on the GGUF file itself (its own quantized kernels). Nothing is timed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections import defaultdict
from pathlib import Path

import torch

BACKENDS = ("int8", "llama.cpp")


def load(target: str, backend: str):
    from specchat.models.config.pairs import PairConfig
    from specchat.models.loader import load_pair

    pair = PairConfig(name=f"quality-{backend}", target=target, k=0, backend=backend,
                      dtype="float32", device="cpu")
    return load_pair(dataclasses.replace(pair))


def greedy(pair, prompt: list[int], tokens: int) -> list[int]:
    from specchat.engine.decoder import Decoder, Round, Settings

    decoder = Decoder(pair.target, None, pair.eos_ids)
    return [t for e in decoder.generate(prompt, Settings(k=0), tokens) if isinstance(e, Round)
            for t in e.committed]


def choices(model, prompt: list[int], answer: list[int]) -> torch.Tensor:
    """The model's argmax at each answer position, reading prompt + answer at once."""
    model.reset()
    ids = torch.tensor(prompt + answer)
    logits = model.forward(ids, keep=len(answer))
    model.reset()
    return logits.argmax(-1)


def measure(target: str, prompts: list, tokens: int) -> dict:
    from specchat.bench.runner import prompt_ids

    reference = load(target, "torch")
    rows = []
    others = {name: load(target, name) for name in BACKENDS}
    for item in prompts:
        prompt = prompt_ids(reference.tokenizer, item.prompt)
        answer = greedy(reference, prompt, tokens)
        want = choices(reference.target, prompt, answer)
        row = {"id": item.id, "category": item.category, "tokens": len(answer)}
        for name, pair in others.items():
            row[name] = int((choices(pair.target, prompt, answer) == want).sum())
        rows.append(row)
        print(json.dumps(row), flush=True)
    return summary(rows, {name: pair.backends["target"] for name, pair in others.items()}
                   | {"reference": reference.backends["target"]})


def summary(rows: list[dict], labels: dict) -> dict:
    """Agreement per backend, overall and per category."""
    out: dict = {"labels": labels, "rows": rows, "agreement": {}}
    by_category: dict = defaultdict(lambda: defaultdict(int))
    for row in rows:
        for key in ("tokens",) + BACKENDS:
            by_category[row["category"]][key] += row[key]
            by_category["all"][key] += row[key]
    for category, sums in by_category.items():
        out["agreement"][category] = {name: round(sums[name] / max(1, sums["tokens"]), 4)
                                      for name in BACKENDS} | {"tokens": sums["tokens"]}
    return out


def main() -> None:
    from specchat.bench.prompts import load_prompts, resolve_prompts_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--prompts", type=Path, default=None)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    prompts = load_prompts(resolve_prompts_file(args.prompts))
    result = measure(args.target, prompts, args.max_new_tokens)
    print(json.dumps(result["agreement"], indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
