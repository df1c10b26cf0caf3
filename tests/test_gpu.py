"""CUDA only (marked `gpu`; skipped without a GPU): the fast path (static cache,
steps captured as CUDA graphs by torch.compile) gives the eager path's greedy
output in float32, keeps the cache invariant every round, and 4bit/8bit targets
load through bitsandbytes and answer."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
import torch

from specchat.engine import Decoder, Finished, ModelDrafter, NgramDrafter, SamplingParams, Settings

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.fixture(scope="module")
def cuda_pairs(tiny_config):
    """The tiny pair loaded eagerly and through the fast path, both on CUDA in float32."""
    import os

    from specchat.models.config import load_catalog
    from specchat.models.loader import load_pair

    catalog = load_catalog(tiny_config)
    loaded = {}
    for mode in ("0", "1"):
        os.environ["SPECCHAT_FAST_PATH"] = mode
        for name in ("tiny", "tiny-ngram"):
            pair = dataclasses.replace(catalog.get(name), device="cuda", dtype="float32")
            loaded[(name, mode)] = load_pair(pair)
    os.environ.pop("SPECCHAT_FAST_PATH")
    return loaded


def greedy(pair, k, prompt, budget=40):
    decoder = Decoder(pair.target, pair.drafter if k else None, pair.eos_ids, check_invariants=True)
    events = decoder.generate(prompt, Settings(k, SamplingParams()), budget)
    return [t for e in events if not isinstance(e, Finished) for t in e.committed]


def test_fast_path_is_selected_automatically_on_cuda(cuda_pairs):
    from specchat.models.static import StaticCausalModel

    fast = cuda_pairs[("tiny", "1")]
    assert isinstance(fast.target, StaticCausalModel) and fast.target.compiled
    assert isinstance(fast.draft_model, StaticCausalModel)
    assert not isinstance(cuda_pairs[("tiny", "0")].target, StaticCausalModel)


@pytest.mark.parametrize("k", [0, 1, 3, 6])
def test_fast_path_greedy_equals_eager_in_float32(cuda_pairs, k):
    prompt = list(range(4, 40))
    eager = greedy(cuda_pairs[("tiny", "0")], 0, prompt)
    assert greedy(cuda_pairs[("tiny", "1")], k, prompt) == eager


def test_fast_path_ngram_greedy_equals_eager_with_cache_invariants(cuda_pairs):
    prompt = [5, 6, 7, 8, 9] * 8
    eager = greedy(cuda_pairs[("tiny-ngram", "0")], 0, prompt)
    assert greedy(cuda_pairs[("tiny-ngram", "1")], 6, prompt) == eager  # checks invariants each round


@pytest.mark.parametrize("quantization", ["4bit", "8bit"])
def test_quantized_target_loads_and_answers(tiny_config, quantization):
    if importlib.util.find_spec("bitsandbytes") is None:
        pytest.skip("bitsandbytes is not installed")
    from specchat.chat.session import ChatSession
    from specchat.models.config import load_catalog
    from specchat.models.loader import load_pair

    config = dataclasses.replace(load_catalog(tiny_config).get("tiny-ngram"), device="cuda",
                                 dtype="float16", quantization=quantization)
    pair = load_pair(config)
    events = list(ChatSession(pair).answer("hello there", max_new_tokens=8))
    assert events[-1].stats.tokens >= 1
    assert pair.memory_bytes > 0
