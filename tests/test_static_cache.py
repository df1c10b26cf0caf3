"""The static, position-indexed KV cache adapter: same logits as the eager
DynamicCache adapter, rollback by position only, and greedy decoding through it
identical to the eager path in float32 (on CPU; tests/test_gpu.py repeats it on CUDA
with CUDA graphs)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from specchat.engine import Decoder, Finished, ModelDrafter, NgramDrafter, SamplingParams, Settings
from specchat.models.torch_backend.adapter import TorchForward, adapter_for
from specchat.models.torch_backend.hf import HFCausalModel
from specchat.models.torch_backend.static import StaticCausalModel


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


def test_the_cache_is_allocated_before_the_first_forward_and_never_moves(load_tiny):
    """On CUDA the first forward is a compiled step: buffers it allocated would lack the
    static addresses CUDA graphs replay into."""
    fast = static_twin(load_tiny("tiny").target)
    fast.reset()
    layers = fast._cache.layers
    assert all(layer.is_initialized for layer in layers)
    assert layers[0].keys.dtype == fast.model.dtype and layers[0].keys.shape[2] == 256
    addresses = [(layer.keys.data_ptr(), layer.values.data_ptr()) for layer in layers]
    fast.forward(torch.arange(3, 20))
    fast.forward(torch.tensor([5]))
    assert [(layer.keys.data_ptr(), layer.values.data_ptr()) for layer in layers] == addresses


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
    fast_draft = ModelDrafter(static_twin(pair.draft, buckets)) if k else None
    assert greedy_ids(fast_target, fast_draft, pair.eos_ids, prompt, k) == reference


def test_greedy_ngram_through_the_static_cache_equals_eager(load_tiny):
    pair = load_tiny("tiny-ngram")
    prompt = [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7]
    reference = greedy_ids(pair.target, None, pair.eos_ids, prompt, 0, budget=40)
    fast = static_twin(pair.target, buckets=True)  # n-gram widths vary: every bucket pads
    assert greedy_ids(fast, NgramDrafter(3), pair.eos_ids, prompt, 6, budget=40) == reference


def test_cpu_keeps_the_static_cache_off_unless_forced(load_tiny):
    from specchat.models.torch_backend.lean import LeanLlama

    model = load_tiny("tiny").target.model
    assert type(adapter_for(model, "cpu")) is LeanLlama
    assert isinstance(adapter_for(model, "cuda"), StaticCausalModel) or not torch.cuda.is_available()
    assert isinstance(adapter_for(model, "cpu", how=TorchForward("static")), StaticCausalModel)
    assert type(adapter_for(model, "cpu", quantized=True)) is HFCausalModel


def test_prepare_runs_every_step_width_and_leaves_an_empty_cache(load_tiny):
    fast = static_twin(load_tiny("tiny").target)
    fast.prepare(widths=5)
    assert fast.cache_length == 0
    fast.forward(torch.arange(3, 13))
    assert fast.cache_length == 10


def test_padding_alone_never_fills_the_cache(load_tiny):
    """58 tokens + 6 fit a 64-token cache even though 6 pads to the 9-wide bucket."""
    eager = load_tiny("tiny").target
    fast = StaticCausalModel(eager.model, eager.vocab_size, max_length=64, compile_steps=False,
                             buckets=True)
    ids = torch.arange(3, 67)
    for model in (eager, fast):
        model.reset()
        model.forward(ids[:58])
    torch.testing.assert_close(fast.forward(ids[58:64], keep=6), eager.forward(ids[58:64], keep=6),
                               atol=1e-4, rtol=1e-4)
    assert fast.cache_length == 64


def test_a_full_cache_is_a_named_error_and_the_model_recovers(load_tiny):
    from specchat.errors import ContextFull

    fast = StaticCausalModel(load_tiny("tiny").target.model, max_length=16, compile_steps=False)
    fast.reset()
    first = fast.forward(torch.arange(3, 13))
    with pytest.raises(ContextFull, match="16 tokens"):
        fast.forward(torch.arange(3, 10))
    assert fast.cache_length == 10
    fast.reset()
    torch.testing.assert_close(fast.forward(torch.arange(3, 13)), first)


def test_the_pair_context_is_the_static_cache_size(tiny_config, monkeypatch):
    """The session budgets by the same number of tokens the static cache holds."""
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair
    from specchat.models.torch_backend.static import DEFAULT_MAX_LENGTH

    monkeypatch.setattr("specchat.models.torch_backend.static.DEFAULT_MAX_LENGTH", 40)
    pair = load_pair(replace(load_catalog(tiny_config).get("tiny"), torch_forward="static"))
    assert "static cache" in pair.backends["target"] and "torch_forward = static" in pair.backends["target"]
    assert DEFAULT_MAX_LENGTH > 40 and pair.target.config.max_position_embeddings > 40
    assert pair.context_length == pair.target.max_length == 40
    assert pair.draft_model.max_length == 40


def test_a_long_chat_on_the_static_cache_keeps_answering(tiny_config, monkeypatch):
    """Past the cache's size the oldest exchanges are dropped, answer after answer."""
    from specchat.chat.events import AnswerDone, ContextTrimmed
    from specchat.chat.session import ChatSession
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    monkeypatch.setattr("specchat.models.torch_backend.static.DEFAULT_MAX_LENGTH", 96)
    session = ChatSession(load_pair(replace(load_catalog(tiny_config).get("tiny"),
                                            torch_forward="static")))
    trimmed = 0
    for turn in range(5):
        events = list(session.answer(f"tell me about the fox, part {turn}", max_new_tokens=24))
        trimmed += sum(isinstance(e, ContextTrimmed) for e in events)
        assert isinstance(events[-1], AnswerDone) and events[-1].stop_reason != "failed"
    assert trimmed >= 1
