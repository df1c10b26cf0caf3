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
    answer = head_data.slot_answers(Int8Batch(model, 2), set(), 4)
    head_data.generate_shards(answer, tokenizer, prompts, folder, 10, 4, 0)
    first = sorted(p.name for p in folder.iterdir())
    assert first == ["features-0000.pt", "features-0001.pt"]
    calls = []
    head_data.generate_shards(lambda *a: calls.append(a) or iter([]), tokenizer, prompts,
                              folder, 10, 4, 0)
    assert not calls
    assert head_data.answer_tokens(head_data.load_shards(folder)) >= 10


def test_the_progress_count_never_runs_back_nor_reaches_the_target_early(qwen, tmp_path,
                                                                       monkeypatch):
    """Three streams over shards of two prompts: answers of the next shard run before a shard
    is written, so the tokens generated pass what the written shards hold."""
    monkeypatch.setattr(head_data, "SHARD_PROMPTS", 2)
    monkeypatch.setattr(head_data, "REPORT_EVERY", 1)
    model, tokenizer = int8(qwen[0]), qwen[1]
    reports: list[int] = []
    answer = head_data.slot_answers(Int8Batch(model, 3), set(), 6)
    head_data.generate_shards(answer, tokenizer, ["one", "two", "three", "four", "five", "six"],
                              tmp_path / "features", 14, 6, 0,
                              report=lambda done, total: reports.append(done))
    written = head_data.answer_tokens(head_data.load_shards(tmp_path / "features"))
    assert reports == sorted(reports)
    assert max(reports[:-1]) == 13 and reports[-1] == written >= 14


@pytest.fixture(scope="module")
def qwen_hf():
    """The tiny Qwen2 as a transformers model in float32 (the GPU path's kind of target)."""
    from tiny import build_tokenizer
    from tiny_gguf import build_qwen2

    tokenizer = build_tokenizer()
    return build_qwen2(len(tokenizer), eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"))


def alone_greedy(model, prompt: list[int], n: int) -> tuple[list[int], torch.Tensor]:
    """Greedy ids of `prompt` + n tokens, whole-sequence forwards, no padding or cache; the
    final hidden states of every token but the last."""
    ids = list(prompt)
    with torch.inference_mode():
        for _ in range(n):
            hidden = model.get_decoder()(input_ids=torch.tensor([ids])).last_hidden_state
            ids.append(int(model.get_output_embeddings()(hidden[0, -1]).argmax()))
        hidden = model.get_decoder()(input_ids=torch.tensor([ids[:-1]])).last_hidden_state
    return ids, hidden[0]


def test_a_wave_of_padded_prompts_answers_each_as_it_would_alone(qwen_hf):
    """The GPU path's answers (prompts of different lengths left-padded into one batch,
    one token a step): each answer and its features are what the target computes for it
    alone, and an answer that ends early (here at its budget) stops collecting."""
    from specchat.models.torch_backend.feature_wave import FeatureWave

    prompts = [[5, 6, 7], [9, 10, 11, 12, 13, 14], [30, 31]]
    jobs = [head_data.Job(0, i, tuple(p), 0.0, i) for i, p in enumerate(prompts)]
    budgets = {0: 6, 1: 6, 2: 6}
    answer = head_data.wave_answers(FeatureWave(qwen_hf), set(), 6, size=3)
    done = dict(answer(jobs, lambda: None))
    assert set(done) == set(jobs)
    for job, prompt in zip(jobs, prompts):
        ids, features = alone_greedy(qwen_hf, prompt, budgets[job.position])
        sample = done[job]
        assert sample.ids.tolist() == ids and sample.prompt_len == len(prompt)
        assert sample.features.shape == features.shape
        torch.testing.assert_close(sample.features.float(), features, atol=2e-2, rtol=2e-2)


def test_in_a_wave_an_answer_that_ends_leaves_the_others_unchanged(qwen_hf):
    """An end-of-sequence token ends one answer mid-wave: it keeps a feature for every token
    fed and none for padding; the answers still going are those of a wave without it."""
    from specchat.models.torch_backend.feature_wave import FeatureWave

    prompts = [[5, 6, 7], [9, 10, 11, 12]]
    first, _ = alone_greedy(qwen_hf, prompts[0], 3)
    eos = {first[len(prompts[0]) + 1]}  # the first answer's second token ends it
    assert eos.isdisjoint(alone_greedy(qwen_hf, prompts[1], 5)[0][len(prompts[1]):])
    jobs = [head_data.Job(0, i, tuple(p), 0.0, i) for i, p in enumerate(prompts)]
    done = dict(head_data.wave_answers(FeatureWave(qwen_hf), eos, 5, size=2)(jobs, lambda: None))
    short = done[jobs[0]]
    assert short.ids.tolist() == first[:len(prompts[0]) + 2]
    assert short.features.shape[0] == len(short.ids) - 1
    assert done[jobs[1]].ids.tolist() == alone_greedy(qwen_hf, prompts[1], 5)[0]


def test_a_sampled_answer_in_a_wave_draws_from_its_own_generator(qwen_hf):
    from specchat.models.torch_backend.feature_wave import FeatureWave

    jobs = [head_data.Job(0, i, (5 + i, 6, 7), 0.8, 100 + i) for i in range(3)]
    together = dict(head_data.wave_answers(FeatureWave(qwen_hf), set(), 8, 3)(jobs, lambda: None))
    alone = dict(head_data.wave_answers(FeatureWave(qwen_hf), set(), 8, 1)(jobs[1:2], lambda: None))
    assert torch.equal(together[jobs[1]].ids, alone[jobs[1]].ids)
