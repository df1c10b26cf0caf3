"""The lean CPU forward computes what transformers' Llama forward computes: the same
logits (float32) through prefill, decoding, multi-token verifies, rollback, chunked
prompts and a growing cache; packed and plain weights agree; a reduced head is -inf
outside its vocabulary; models it cannot run fall back to transformers' forward; and
greedy decoding through it equals greedy decoding through transformers."""

from __future__ import annotations

import pytest
import torch

from specchat.engine import Decoder, Finished, ModelDrafter, SamplingParams, Settings
from specchat.models.blocks import kv_buffer
from specchat.models.torch_backend import lean
from specchat.models.torch_backend.adapter import TorchForward, adapter_for
from specchat.models.torch_backend.hf import HFCausalModel
from specchat.models.torch_backend.lean import LeanLlama, lean_problem
from specchat.models.torch_backend.reduced_vocab import ReducedVocabModel

CLOSE = dict(atol=2e-4, rtol=2e-4)


def tiny_llama(**overrides):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(3)
    settings = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                    initializer_range=0.3, tie_word_embeddings=False)
    settings.update(overrides)
    return LlamaForCausalLM(LlamaConfig(**settings)).eval()


def same_logits_through_a_session(fast, reference, prompt_length: int = 20):
    """Prefill, single steps, a crop and a 3-token verify: logits agree at every step."""
    ids = torch.arange(prompt_length + 12) % 90 + 3
    for model in (fast, reference):
        model.reset()
    torch.testing.assert_close(fast.forward(ids[:prompt_length], keep=3),
                               reference.forward(ids[:prompt_length], keep=3), **CLOSE)
    for i in range(prompt_length, prompt_length + 6):
        torch.testing.assert_close(fast.forward(ids[i:i + 1]), reference.forward(ids[i:i + 1]),
                                   **CLOSE)
    for model in (fast, reference):
        model.crop(prompt_length + 2)
    verify = ids[prompt_length + 6:prompt_length + 9]
    torch.testing.assert_close(fast.forward(verify, keep=3), reference.forward(verify, keep=3),
                               **CLOSE)
    assert fast.cache_length == reference.cache_length == prompt_length + 5


@pytest.mark.parametrize("overrides", [{}, {"attention_bias": True}, {"num_key_value_heads": 4},
                                       {"tie_word_embeddings": True}])
def test_lean_logits_equal_transformers_in_float32(overrides):
    model = tiny_llama(**overrides)
    same_logits_through_a_session(LeanLlama(model), HFCausalModel(model))


def test_lean_logits_survive_chunked_prompts_and_a_growing_cache(monkeypatch):
    monkeypatch.setattr(kv_buffer, "FIRST_CAPACITY", 8)
    monkeypatch.setattr(lean, "PREFILL_CHUNK", 16)
    model = tiny_llama()
    fast = LeanLlama(model)
    same_logits_through_a_session(fast, HFCausalModel(model), prompt_length=53)
    assert fast.kv.capacity >= 64


def test_packed_and_plain_weights_give_the_same_logits():
    model = tiny_llama()
    packed, plain = LeanLlama(model, pack=True), LeanLlama(model, pack=False)
    assert packed.layers[0].qkv.packed is not None and plain.layers[0].qkv.packed is None
    same_logits_through_a_session(packed, plain)


def test_rollback_recomputes_what_was_overwritten():
    fast = LeanLlama(tiny_llama())
    fast.reset()
    fast.forward(torch.arange(5, 25))
    before = fast.forward(torch.tensor([7, 8, 9]), keep=3)
    fast.forward(torch.tensor([50, 51, 52, 53]), keep=1)
    fast.crop(20)
    assert fast.cache_length == 20
    torch.testing.assert_close(fast.forward(torch.tensor([7, 8, 9]), keep=3), before)


def test_reduced_head_matches_the_eager_reduced_model_and_is_minus_infinity_elsewhere():
    model = tiny_llama()
    vocab = list(range(0, 96, 3))
    fast, eager = LeanLlama(model, head_ids=vocab), ReducedVocabModel(model, vocab)
    for m in (fast, eager):
        m.reset()
    ids = torch.arange(4, 30)
    fast_logits, eager_logits = fast.forward(ids, keep=2), eager.forward(ids, keep=2)
    outside = torch.ones(96, dtype=torch.bool)
    outside[vocab] = False
    assert torch.isinf(fast_logits[:, outside]).all()
    torch.testing.assert_close(fast_logits[:, ~outside], eager_logits[:, ~outside], **CLOSE)


def test_models_the_lean_forward_cannot_run_fall_back_to_transformers():
    assert "MLP with biases" in lean_problem(tiny_llama(mlp_bias=True))
    assert "activation" in lean_problem(tiny_llama(hidden_act="gelu"))
    assert isinstance(adapter_for(tiny_llama(mlp_bias=True), "cpu"), HFCausalModel)
    assert isinstance(adapter_for(tiny_llama(), "cpu"), LeanLlama)


def test_torch_forward_eager_turns_the_lean_forward_off():
    eager = TorchForward("eager")
    assert isinstance(adapter_for(tiny_llama(), "cpu", how=eager), HFCausalModel)
    assert isinstance(adapter_for(tiny_llama(), "cpu", head_ids=[1, 2, 3], how=eager),
                      ReducedVocabModel)


def greedy_ids(target, draft, k: int, prompt) -> list[int]:
    drafter = ModelDrafter(draft) if k else None
    events = Decoder(target, drafter, set()).generate(prompt, Settings(k, SamplingParams()), 30)
    return [t for e in events if not isinstance(e, Finished) for t in e.committed]


@pytest.mark.parametrize("k", [0, 1, 3, 5])
def test_greedy_decoding_through_lean_equals_transformers_forward(k):
    target, draft = tiny_llama(), tiny_llama(num_hidden_layers=1)
    prompt = [5, 17, 33, 8, 61, 2]
    lean_ids = greedy_ids(LeanLlama(target), LeanLlama(draft), k, prompt)
    eager_ids = greedy_ids(HFCausalModel(target), HFCausalModel(draft), k, prompt)
    assert lean_ids == eager_ids and len(lean_ids) == 30


def test_int8_projections_stay_within_a_few_bfloat16_steps_and_only_for_bfloat16():
    model = tiny_llama().to(torch.bfloat16)
    int8, exact = LeanLlama(model, int8=True), LeanLlama(model)
    assert int8.layers[0].qkv.int8 is not None and exact.layers[0].qkv.int8 is None
    x = torch.randn(3, 64, dtype=torch.bfloat16)
    got, want = int8.layers[0].gate_up(x)[0].float(), exact.layers[0].gate_up(x)[0].float()
    assert (got - want).abs().max() <= 0.02 * want.abs().max()
    assert LeanLlama(tiny_llama(), int8=True).layers[0].qkv.int8 is None  # float32: packed instead


@pytest.mark.parametrize("k", [1, 3])
def test_an_int8_draft_leaves_greedy_output_unchanged(k):
    target = tiny_llama()
    draft = tiny_llama().to(torch.bfloat16)  # the target itself, in bfloat16 with int8 weights
    prompt = [5, 17, 33, 8, 61, 2]
    events = list(Decoder(LeanLlama(target), ModelDrafter(LeanLlama(draft, int8=True)), set())
                  .generate(prompt, Settings(k, SamplingParams()), 30))
    spec_ids = [t for e in events if not isinstance(e, Finished) for t in e.committed]
    assert spec_ids == greedy_ids(LeanLlama(target), None, 0, prompt)
    accepted = sum(len(e.accepted) for e in events if not isinstance(e, Finished))
    assert accepted > len(spec_ids) // 3  # a near-copy of the target: most drafts survive
