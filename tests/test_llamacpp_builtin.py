"""The built-in pair on llama.cpp (slow: loads SmolLM2-135M-Instruct's GGUF): llama.cpp
reads the same vocabulary as the transformers tokenizer specchat uses, and speculative
decoding on it (llama.cpp target, torch or n-gram draft) is the target's own greedy output.

llama.cpp computes in the file's Q4_1 weights: a batched verify may round differently
from one-token decoding, so where the two answers part, the target's top-two logit
margin at that token must be a near-tie (docs/design.md §3), not a real disagreement."""

from __future__ import annotations

import dataclasses

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make test installs it)")

PROMPTS = [
    "Repeat the following sentence exactly: The quick brown fox jumps over the lazy dog.",
    "Write a Python function that checks whether a string is a palindrome.",
]
NEAR_TIE = 0.05
"""Largest top-two logit gap (in logits) a rounding difference may flip."""


@pytest.fixture(scope="module")
def pairs():
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    catalog, loaded = load_catalog(), {}

    def load(name: str):
        if name not in loaded:
            loaded[name] = load_pair(dataclasses.replace(catalog.get(name), backend="llama.cpp"))
        return loaded[name]

    return load


def answer(pair, prompt: str, speculate: bool) -> tuple[list[int], list[float]]:
    """Committed ids of a greedy answer, and the target's top-two margin at each."""
    from specchat.chat.decoding import drafter_for
    from specchat.bench.runner import prompt_ids
    from specchat.engine import Decoder, Round, SamplingParams
    from specchat.engine.adaptive import settings_for

    drafter = drafter_for(pair) if speculate else None
    settings = settings_for(pair.config.k if speculate else 0, SamplingParams())
    ids, margins = [], []
    for event in Decoder(pair.target, drafter, pair.eos_ids).generate(
            prompt_ids(pair.tokenizer, prompt), settings, 40):
        if isinstance(event, Round):
            ids += list(event.committed)
            margins += list(event.margins)
    return ids, margins


def assert_same_up_to_near_ties(spec: list[int], plain: list[int], margins: list[float]) -> None:
    if spec == plain:
        return
    first = next(i for i, (a, b) in enumerate(zip(spec, plain)) if a != b)
    assert margins and margins[first] < NEAR_TIE, (
        f"answers part at token {first} where the target's margin is "
        f"{margins[first] if margins else 'unknown'}: not a rounding near-tie")


def test_llamacpp_reads_the_same_vocabulary_as_the_builtin_tokenizer(pairs):
    pair = pairs("smollm2-135m-plain")
    model, tokenizer = pair.target, pair.tokenizer
    assert model.n_vocab == len(tokenizer) == 49152
    for text in ["Why is the sky blue?", "def is_palindrome(s):\n    return s == s[::-1]",
                 "Caf\u00e9 na\u00efve \u2014 \u65e5\u672c\u8a9e 12345"]:
        assert model.tokenize(text) == tokenizer.encode(text, add_special_tokens=False)
    special = "<|im_start|>user\nhi<|im_end|>"
    assert model.tokenize(special, special=True) == tokenizer.encode(special, add_special_tokens=False)


@pytest.mark.parametrize("name", ["smollm2-135m", "smollm2-135m-ngram"])
@pytest.mark.parametrize("prompt", PROMPTS)
def test_builtin_pair_on_llamacpp_is_the_targets_greedy_output(pairs, name, prompt):
    pair = pairs(name)
    assert pair.backends["target"].startswith("llama.cpp")
    spec, _ = answer(pair, prompt, speculate=True)
    plain, margins = answer(pair, prompt, speculate=False)
    assert_same_up_to_near_ties(spec, plain, margins)
