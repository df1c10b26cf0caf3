"""The static, position-indexed KV cache adapter: same logits as the eager
DynamicCache adapter, rollback by position only, and greedy decoding through it
identical to the eager path in float32 (on CPU; tests/test_gpu.py repeats it on CUDA
with CUDA graphs)."""

from __future__ import annotations

import pytest
import torch

from specchat.engine import Decoder, Finished, ModelDrafter, NgramDrafter, SamplingParams, Settings
from specchat.models.adapters import adapter_for
from specchat.models.hf import HFCausalModel
from specchat.models.static import StaticCausalModel


def static_twin(adapter: HFCausalModel, buckets: bool = False) -> StaticCausalModel:
    return StaticCausalModel(adapter.model, adapter.vocab_size, max_length=256, compile_steps=False,
                             buckets=buckets)


def greedy_ids(target, drafter, eos, prompt, k, budget=24):
    events = Decoder(target, drafter, eos).generate(prompt, Settings(k, SamplingParams()), budget)
    return [t for e in events if not isinstance(e, Finished) for t in e.committed]


def test_static_cache_logits_match_the_dynamic_cache(load_tiny):
    eager = load_tiny("tiny").target
    fast = static_twin(eager)
    ids = torch.arange(3, 40)
    for model in (eager, fast):
        model.reset()
    close = dict(atol=1e-4, rtol=1e-4)  # float32; the static path attends over masked padding
    torch.testing.assert_close(fast.forward(ids[:20], keep=3), eager.forward(ids[:20], keep=3), **close)
    for i in range(20, 30):
        torch.testing.assert_close(fast.forward(ids[i:i + 1]), eager.forward(ids[i:i + 1]), **close)
    assert fast.cache_length == eager.cache_length == 30


@pytest.mark.parametrize("buckets", [False, True])
def test_rollback_is_only_moving_the_position(load_tiny, buckets):
    fast = static_twin(load_tiny("tiny").target, buckets)
    fast.reset()
    fast.forward(torch.arange(5, 25))
    before = fast.forward(torch.tensor([7, 8, 9]), keep=3)
    fast.forward(torch.tensor([50, 51, 52, 53]), keep=1)  # stale entries past the position
    fast.crop(20)
    assert fast.cache_length == 20
    torch.testing.assert_close(fast.forward(torch.tensor([7, 8, 9]), keep=3), before)


def test_reset_forgets_the_previous_answer(load_tiny):
    fast = static_twin(load_tiny("tiny").target)
    fast.reset()
    first = fast.forward(torch.arange(3, 13))
    fast.forward(torch.arange(100, 140))
    fast.reset()
    assert fast.cache_length == 0
    torch.testing.assert_close(fast.forward(torch.arange(3, 13)), first)


@pytest.mark.parametrize("k, buckets", [(0, False), (1, False), (3, False), (5, False),
                                        (3, True), (6, True)])
def test_greedy_through_the_static_cache_equals_eager_target_only(load_tiny, k, buckets):
    pair = load_tiny("tiny")
    prompt = list(range(4, 30))
    reference = greedy_ids(pair.target, None, pair.eos_ids, prompt, 0)
    fast_target = static_twin(pair.target, buckets)
    fast_draft = ModelDrafter(static_twin(pair.drafter.model, buckets)) if k else None
    assert greedy_ids(fast_target, fast_draft, pair.eos_ids, prompt, k) == reference


def test_greedy_ngram_through_the_static_cache_equals_eager(load_tiny):
    pair = load_tiny("tiny-ngram")
    prompt = [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7]
    reference = greedy_ids(pair.target, None, pair.eos_ids, prompt, 0, budget=40)
    fast = static_twin(pair.target, buckets=True)  # n-gram widths vary: every bucket pads
    assert greedy_ids(fast, NgramDrafter(3), pair.eos_ids, prompt, 6, budget=40) == reference


def test_full_static_cache_is_reported_not_silently_overwritten(load_tiny):
    fast = StaticCausalModel(load_tiny("tiny").target.model, max_length=16, compile_steps=False)
    fast.reset()
    fast.forward(torch.arange(3, 15))
    with pytest.raises(ValueError, match="full"):
        fast.forward(torch.arange(3, 10))


def test_cpu_keeps_the_static_cache_off_unless_forced(load_tiny, monkeypatch):
    from specchat.models.lean import LeanLlama

    model = load_tiny("tiny").target.model
    monkeypatch.delenv("SPECCHAT_FAST_PATH", raising=False)
    assert type(adapter_for(model, "cpu")) is LeanLlama
    assert isinstance(adapter_for(model, "cuda"), StaticCausalModel) or not torch.cuda.is_available()
    monkeypatch.setenv("SPECCHAT_FAST_PATH", "1")
    assert isinstance(adapter_for(model, "cpu"), StaticCausalModel)
    assert type(adapter_for(model, "cpu", quantized=True)) is HFCausalModel


def test_prepare_runs_every_step_width_and_leaves_an_empty_cache(load_tiny):
    fast = static_twin(load_tiny("tiny").target)
    fast.prepare(widths=5)
    assert fast.cache_length == 0
    fast.forward(torch.arange(3, 13))
    assert fast.cache_length == 10
