"""The shipped draft of the built-in pair (slow: loads SmolLM2-135M-Instruct): it is
small, resolves to a full transformers folder in the cache, and decoding with it in
float32 is token-for-token the target's own greedy output."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_shipped_draft_is_under_20_megabytes_and_holds_no_embeddings():
    from safetensors import safe_open

    from specchat.models.config.refs import builtin_draft

    folder = builtin_draft("smollm2-135m-draft")
    assert folder is not None
    size = sum(p.stat().st_size for p in folder.iterdir())
    assert size < 20 * 2**20
    with safe_open(str(folder / "draft.safetensors"), "pt") as weights:
        assert not any("embed_tokens" in k or "lm_head" in k for k in weights.keys())


def test_default_pair_uses_the_distilled_draft_and_is_lossless_in_float32():
    import dataclasses

    from test_pair_lossless import answer, committed_ids

    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair
    # a fixed k: whether k = "auto" drafts depends on this machine's timed costs
    config = dataclasses.replace(load_catalog().get("smollm2-135m"), backend="torch", k=3)
    pair = load_pair(config, dtype="float32")
    assert pair.draft_model.vocab is not None  # the reduced output vocabulary
    for prompt in ["What is 12 times 7?", "Write a haiku about rain."]:
        spec, done = answer(pair, prompt, speculate=True, n=32)
        plain, _ = answer(pair, prompt, speculate=False, n=32)
        assert committed_ids(spec) == committed_ids(plain)
        assert done.stats.accepted > 0
