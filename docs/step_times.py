"""Median time of one decoding step of the built-in target and draft, per forward.

    PYTHONPATH=. python docs/step_times.py [--dtype bfloat16] [--context 200] [--repeats 30]

Loads the default pair once and times, interleaved so drift hits all alike, one
token after `context` tokens of cache through: transformers' forward
(`HFCausalModel` / `ReducedVocabModel`), the lean forward, and for the draft the
lean forward with int8 kernels. Prints milliseconds per step.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from specchat.models.config.pairs import load_catalog
from specchat.models.torch_backend.hf import HFCausalModel
from specchat.models.torch_backend.lean import LeanLlama
from specchat.models.loader import load_pair
from specchat.models.torch_backend.reduced_vocab import ReducedVocabModel


def step_ms(models: dict, context: int, repeats: int) -> dict[str, float]:
    prompt = torch.randint(100, 40000, (context,), generator=torch.Generator().manual_seed(0))
    for model in models.values():
        model.reset()
        model.forward(prompt)
    times = {name: [] for name in models}
    for _ in range(repeats):
        for name, model in models.items():
            model.crop(context)
            started = time.perf_counter()
            model.forward(torch.tensor([1234]))
            times[name].append(1000 * (time.perf_counter() - started))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--context", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    pair = load_pair(load_catalog().get("smollm2-135m"), dtype=args.dtype)
    target, draft = pair.target.model, pair.draft_model.model
    vocab = pair.draft_model.vocab.tolist()
    size = pair.target.vocab_size
    targets = {"transformers": HFCausalModel(target), "lean": LeanLlama(target)}
    drafts = {"transformers": ReducedVocabModel(draft, vocab, size),
              "lean": LeanLlama(draft, size, vocab),
              "lean int8": LeanLlama(draft, size, vocab, int8=True)}
    print(f"dtype {args.dtype}, one token after {args.context}, median of {args.repeats} (ms)")
    for role, models in (("target", targets), ("draft", drafts)):
        row = step_ms(models, args.context, args.repeats)
        print(f"{role:6s} " + "  ".join(f"{name} {ms:.1f}" for name, ms in row.items()))


if __name__ == "__main__":
    main()
