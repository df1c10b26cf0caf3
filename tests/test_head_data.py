"""The draft head's training data (`specchat distill --head`, specchat/distill/head_data.py) on
a tiny random Qwen2 GGUF: the int8 target's features are its final hidden states at every
token a forward fed, the batched forward that generates the data computes what the target
alone computes (bit for bit), and the shards hold the target's own answers with their
features and are never generated twice."""

from __future__ import annotations

import pytest
import torch

from specchat.models.backend_int8 import int8_support

pytestmark = pytest.mark.skipif(not int8_support().usable, reason=int8_support().why)

from specchat.distill import head_data  # noqa: E402
from specchat.models.int8 import convert  # noqa: E402
from specchat.models.int8.batched import Int8Batch  # noqa: E402
from specchat.models.int8.model import Int8Model  # noqa: E402


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    from tiny import build_tokenizer
    from tiny_gguf import build_qwen2, write_qwen2_gguf

    root = tmp_path_factory.mktemp("head-data")
    tokenizer = build_tokenizer()
    model = build_qwen2(len(tokenizer), eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"))
    return write_qwen2_gguf(model, tokenizer, root / "qwen2.gguf"), tokenizer


def int8(path, kernel: str = "fbgemm") -> Int8Model:
    found = convert.converted(path)
    return Int8Model(found.arch, found.tensors, kernel=kernel)


def test_the_features_are_the_normed_hidden_states_of_every_token_fed(qwen):
    model = int8(qwen[0])
    logits = model.forward(torch.arange(10, 22), keep=3)
    assert model.features.shape == (12, model.arch.hidden)
    with torch.inference_mode():
        rows = model.head(model.features[-3:])[:, : model.vocab_size]
    assert torch.equal(rows, logits)  # what the output matrix multiplied


@pytest.mark.parametrize("kernel", ["fbgemm", "onednn"])
def test_a_batched_forward_computes_what_the_model_alone_computes(qwen, kernel):
    """On either kernel (a 1.5B target collects its features on oneDNN where the CPU has AMX)."""
    model, batch = int8(qwen[0], kernel), None
    prompts = [torch.arange(5, 14), torch.arange(40, 43), torch.arange(100, 120)]
    alone = []
    for prompt in prompts:
        model.reset()
        first = model.forward(prompt)
        features = model.features
        second = model.forward(torch.tensor([7]))
        alone.append((first, features, second, model.features))
    batch = Int8Batch(model, 3)
    logits, features = batch.forward(dict(enumerate(prompts)))
    steps, step_features = batch.forward({i: torch.tensor([7]) for i in range(3)})
    for i, (first, prompt_features, second, last) in enumerate(alone):
        before = sum(len(p) for p in prompts[:i])
        assert torch.equal(logits[i:i + 1], first) and torch.equal(steps[i:i + 1], second)
        assert torch.equal(features[before:before + len(prompts[i])], prompt_features)
        assert torch.equal(step_features[i:i + 1], last)


def test_answers_are_the_targets_own_with_a_feature_for_every_fed_token(qwen):
    model = int8(qwen[0])
    prompts = [[5, 6, 7], [9, 10, 11, 12], [30, 31]]
    jobs = [head_data.Job(0, i, tuple(p), 0.0, i) for i, p in enumerate(prompts)]
    done = dict(head_data.answers(Int8Batch(model, 2), jobs, set(), 6))
    for job, prompt in zip(jobs, prompts):
        sample = done[job]
        model.reset()
        ids = list(prompt)
        for _ in range(6):
            ids.append(int(model.forward(torch.tensor(ids[model.cache_length:])).argmax()))
        assert sample.ids.tolist() == ids and sample.prompt_len == len(prompt)
        model.reset()
        model.forward(torch.tensor(ids[:-1]))
        assert sample.features.shape == (len(ids) - 1, model.arch.hidden)
        assert torch.allclose(sample.features.float(), model.features, atol=1e-2, rtol=1e-2)


def test_a_sampled_answer_does_not_depend_on_the_answers_beside_it(qwen):
    model = int8(qwen[0])
    jobs = [head_data.Job(0, i, (5 + i, 6, 7), 0.8, 100 + i) for i in range(3)]
    together = dict(head_data.answers(Int8Batch(model, 3), jobs, set(), 8))
    alone = dict(head_data.answers(Int8Batch(model, 1), jobs[1:2], set(), 8))
    assert torch.equal(together[jobs[1]].ids, alone[jobs[1]].ids)


def test_shards_resume_without_generating_a_feature_twice(qwen, tmp_path, monkeypatch):
    monkeypatch.setattr(head_data, "SHARD_PROMPTS", 2)
    model, tokenizer = int8(qwen[0]), qwen[1]
    prompts = ["one", "two", "three", "four"]
    folder = tmp_path / "features"
    head_data.generate_shards(Int8Batch(model, 2), tokenizer, set(), prompts, folder, 10, 4, 0)
    first = sorted(p.name for p in folder.iterdir())
    assert first == ["features-0000.pt", "features-0001.pt"]
    calls = []
    monkeypatch.setattr(head_data, "answers", lambda *a, **k: calls.append(a) or iter([]))
    head_data.generate_shards(Int8Batch(model, 2), tokenizer, set(), prompts, folder, 10, 4, 0)
    assert not calls
    assert head_data.answer_tokens(head_data.load_shards(folder)) >= 10
