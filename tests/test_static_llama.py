"""specchat's own static-cache Llama forward (models/torch_backend/static_llama.py), on the CPU in
float32: the same logits as transformers, rollback by position only, greedy decoding
identical to the eager path, and chosen for the Llama family only. CUDA graph capture
is exercised in tests/test_gpu.py."""

from __future__ import annotations

import pytest
import torch

from specchat.engine import Decoder, Finished, ModelDrafter, SamplingParams, Settings
from specchat.models.torch_backend.adapter import static_adapter
from specchat.models.torch_backend.static import StaticCausalModel
from specchat.models.torch_backend.static_llama import StaticLlama, owned_problem

CLOSE = dict(atol=1e-4, rtol=1e-4)


def owned(adapter, buckets: bool = False, max_length: int = 128) -> StaticLlama:
    return StaticLlama(adapter.model, adapter.vocab_size, max_length=max_length,
                       compile_steps=False, buckets=buckets)


def greedy_ids(target, drafter, eos, prompt, k, budget=24):
    events = Decoder(target, drafter, eos).generate(prompt, Settings(k, SamplingParams()), budget)
    return [t for e in events if not isinstance(e, Finished) for t in e.committed]


def test_own_forward_gives_transformers_logits_at_every_width(load_tiny):
    eager = load_tiny("tiny").target
    fast = owned(eager)
    ids = torch.randint(3, eager.vocab_size, (48,), generator=torch.Generator().manual_seed(1))
    for model in (eager, fast):
        model.reset()
    torch.testing.assert_close(fast.forward(ids[:20], keep=4), eager.forward(ids[:20], keep=4), **CLOSE)
    start = 20
    for width in (1, 2, 5, 9, 1):
        piece = ids[start:start + width]
        torch.testing.assert_close(fast.forward(piece, keep=width), eager.forward(piece, keep=width),
                                   **CLOSE)
        start += width
    assert fast.cache_length == eager.cache_length == start


@pytest.mark.parametrize("buckets", [False, True])
def test_own_forward_rolls_back_by_position_only(load_tiny, buckets):
    fast = owned(load_tiny("tiny").target, buckets)
    fast.reset()
    fast.forward(torch.arange(5, 25))
    before = fast.forward(torch.tensor([7, 8, 9]), keep=3)
    fast.forward(torch.tensor([50, 51, 52, 53, 54, 55]), keep=1)  # stale entries past the position
    fast.crop(20)
    torch.testing.assert_close(fast.forward(torch.tensor([7, 8, 9]), keep=3), before)


@pytest.mark.parametrize("k, buckets", [(0, False), (1, True), (3, False), (4, True)])
def test_greedy_through_the_own_forward_equals_eager_target_only(load_tiny, k, buckets):
    pair = load_tiny("tiny")
    prompt = list(range(4, 30))
    reference = greedy_ids(pair.target, None, pair.eos_ids, prompt, 0)
    target = owned(pair.target, buckets)
    drafter = ModelDrafter(owned(pair.draft, buckets)) if k else None
    assert greedy_ids(target, drafter, pair.eos_ids, prompt, k) == reference


def test_own_forward_writes_keys_only_at_the_fed_positions(load_tiny):
    fast = owned(load_tiny("tiny").target)
    fast.reset()
    fast.forward(torch.arange(3, 13))
    assert fast.keys[:, :, :10].abs().sum() > 0
    assert fast.keys[:, :, 10:].abs().sum() == 0 and fast.values[:, :, 10:].abs().sum() == 0
    assert fast.kv_cache_bytes == 2 * fast.keys.numel() * 4


def test_llama_family_gets_the_own_forward_others_keep_transformers(load_tiny):
    from transformers import GPT2Config, GPT2LMHeadModel

    model = load_tiny("tiny").target.model
    assert owned_problem(model) is None
    assert type(static_adapter(model, max_length=64)) is StaticLlama
    other = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50)).eval()
    assert "gpt2" in owned_problem(other)
    assert type(static_adapter(other, max_length=64)) is StaticCausalModel


def test_attention_span_grows_past_256_tokens_without_changing_logits(load_tiny):
    eager = load_tiny("tiny").target
    fast = owned(eager, buckets=True, max_length=512)
    assert fast.spans == [256, 512]
    ids = torch.randint(3, eager.vocab_size, (300,), generator=torch.Generator().manual_seed(2))
    for model in (eager, fast):
        model.reset()
    torch.testing.assert_close(fast.forward(ids[:250]), eager.forward(ids[:250]), **CLOSE)
    start = 250
    for width in (3, 5, 1):  # the 5 crosses 256: the next span
        piece = ids[start:start + width]
        torch.testing.assert_close(fast.forward(piece, keep=width), eager.forward(piece, keep=width),
                                   **CLOSE)
        start += width
    assert fast._span == 512


def test_prepare_visits_every_span_and_leaves_an_empty_cache(load_tiny):
    fast = owned(load_tiny("tiny").target, buckets=True, max_length=300)
    fast.prepare(widths=5)
    assert fast.cache_length == 0
    first = fast.forward(torch.arange(3, 13))
    fast.reset()
    torch.testing.assert_close(fast.forward(torch.arange(3, 13)), first)


def test_a_reduced_vocabulary_draft_runs_on_the_own_static_forward_with_the_eager_logits(load_tiny):
    """A `specchat distill` draft (a reduced output head) is captured with the rest on CUDA,
    instead of running transformers' eager forward a token at a time (on an H100 that made
    a round of the built-in pair cost 5 target steps): the same -inf-padded logits."""
    from specchat.models.torch_backend.adapter import TorchForward, torch_adapter
    from specchat.models.torch_backend.reduced_vocab import ReducedVocabModel

    model = load_tiny("tiny").target.model
    head = sorted(set(range(3, model.config.vocab_size, 3)))
    adapter, label = torch_adapter(model, "cpu", head_ids=head, how=TorchForward("static"))
    assert isinstance(adapter, StaticLlama) and "static cache" in label and "reduced" in label
    eager = ReducedVocabModel(model, head)
    ids = torch.randint(3, eager.vocab_size, (30,), generator=torch.Generator().manual_seed(2))
    for m in (adapter, eager):
        m.reset()
    for start, width in ((0, 12), (12, 1), (13, 4), (17, 1)):
        fast, slow = adapter.forward(ids[start:start + width], keep=width), eager.forward(
            ids[start:start + width], keep=width)
        assert torch.equal(torch.isinf(fast), torch.isinf(slow))  # the same tokens cut
        torch.testing.assert_close(fast[~torch.isinf(fast)], slow[~torch.isinf(slow)], **CLOSE)
