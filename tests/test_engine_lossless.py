"""Speculative decoding is lossless: greedy output equals plain greedy decoding token
for token, and sampled output follows the target's processed distribution (χ²)."""

from __future__ import annotations

import itertools

import pytest
import torch
from scipy.stats import chisquare

from specchat.engine import Decoder, Finished, ModelDrafter, NgramDrafter, Round, SamplingParams, Settings
from specchat.engine.sampling import to_probs
from toy import TableModel, plain_greedy

PROMPTS = [[1, 2], [3, 1, 4, 1, 5], [7], [2, 2, 2, 2, 2, 2]]


def generated(decoder: Decoder, prompt, settings, n, generator=None) -> list[int]:
    out = []
    for event in decoder.generate(prompt, settings, n, generator):
        if isinstance(event, Round):
            out.extend(event.committed)
    return out


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_speculative_equals_plain_greedy(k, prompt):
    target, draft = TableModel(seed=0), TableModel(seed=1)
    decoder = Decoder(target, ModelDrafter(draft), eos_ids=set())
    assert generated(decoder, prompt, Settings(k=k), 40) == plain_greedy(TableModel(seed=0), prompt, 40)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_ngram_equals_plain_greedy(prompt):
    decoder = Decoder(TableModel(seed=0), NgramDrafter(max_ngram=2, min_ngram=1), eos_ids=set())
    assert generated(decoder, prompt, Settings(k=4), 40) == plain_greedy(TableModel(seed=0), prompt, 40)


def test_k_zero_is_plain_decoding_with_target_kind():
    decoder = Decoder(TableModel(seed=0), ModelDrafter(TableModel(seed=1)), eos_ids=set())
    rounds = [e for e in decoder.generate([1, 2], Settings(k=0), 10) if isinstance(e, Round)]
    assert [e.token_kind for e in rounds] == ["target"] * 10
    assert all(e.drafted == 0 for e in rounds)
    assert [e.token for e in rounds] == plain_greedy(TableModel(seed=0), [1, 2], 10)


@pytest.mark.parametrize("k", [2, 4])
def test_self_draft_accepts_everything_and_tau_is_k_plus_one(k):
    target = TableModel(seed=3)
    draft = TableModel(seed=99).copy_tables_from(target)
    decoder = Decoder(target, ModelDrafter(draft), eos_ids=set())
    rounds = [e for e in decoder.generate([1, 2], Settings(k=k), (k + 1) * 6) if isinstance(e, Round)]
    assert all(not e.rejected and e.token_kind == "bonus" for e in rounds)
    assert sum(len(e.committed) for e in rounds) / len(rounds) == k + 1


# --- distribution tests --------------------------------------------------------------

VOCAB = 6
PROMPT = [1, 2]


def exact_joint(model: TableModel, params: SamplingParams) -> dict[tuple[int, int], float]:
    """P(x1, x2 | prompt) under the target's processed distribution."""
    first = to_probs(model.logits_after(PROMPT), params)
    joint = {}
    for x1 in range(VOCAB):
        second = to_probs(model.logits_after(PROMPT + [x1]), params)
        for x2 in range(VOCAB):
            joint[(x1, x2)] = float(first[x1] * second[x2])
    return joint


def sampled_pairs(decoder: Decoder, params: SamplingParams, k: int, runs: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    counts = dict.fromkeys(itertools.product(range(VOCAB), repeat=2), 0)
    for _ in range(runs):
        tokens = generated(decoder, PROMPT, Settings(k=k, sampling=params), 2, generator)
        counts[tuple(tokens[:2])] += 1
    return counts


def chi2_pvalue(counts: dict, probs: dict, runs: int) -> float:
    """χ² goodness of fit, pooling cells expected below 5 into one."""
    observed, expected, pooled_obs, pooled_exp = [], [], 0, 0.0
    for cell, p in probs.items():
        if p * runs < 5:
            pooled_obs, pooled_exp = pooled_obs + counts[cell], pooled_exp + p * runs
        else:
            observed.append(counts[cell])
            expected.append(p * runs)
    if pooled_exp > 0:
        observed.append(pooled_obs)
        expected.append(pooled_exp)
    scale = sum(observed) / sum(expected)
    return chisquare(observed, [e * scale for e in expected]).pvalue


SAMPLING_CASES = {
    "temperature 1": SamplingParams(temperature=1.0),
    "temperature 0.7, top-k 3": SamplingParams(temperature=0.7, top_k=3),
    "temperature 1.3, top-p 0.8": SamplingParams(temperature=1.3, top_p=0.8),
}


@pytest.mark.parametrize("case", SAMPLING_CASES)
@pytest.mark.parametrize("k", [1, 3])
def test_speculative_sampling_reproduces_the_target_distribution(case, k):
    params, runs = SAMPLING_CASES[case], 3000
    target = TableModel(VOCAB, seed=5, scale=1.0)
    decoder = Decoder(target, ModelDrafter(TableModel(VOCAB, seed=6, scale=1.0)), eos_ids=set())
    counts = sampled_pairs(decoder, params, k, runs, seed=k)
    assert chi2_pvalue(counts, exact_joint(target, params), runs) > 1e-3


def test_ngram_sampling_reproduces_the_target_distribution():
    params, runs = SamplingParams(temperature=1.0), 3000
    target = TableModel(VOCAB, seed=5, scale=1.0)
    decoder = Decoder(target, NgramDrafter(max_ngram=1, min_ngram=1), eos_ids=set())
    counts = sampled_pairs(decoder, params, 3, runs, seed=11)
    assert chi2_pvalue(counts, exact_joint(target, params), runs) > 1e-3


def test_chi2_check_detects_sampling_from_the_draft_instead():
    """The distribution test has power: the draft's own distribution fails it."""
    params, runs = SamplingParams(temperature=1.0), 3000
    target, draft = TableModel(VOCAB, seed=5, scale=1.0), TableModel(VOCAB, seed=6, scale=1.0)
    plain_draft = Decoder(draft, None, eos_ids=set())
    counts = sampled_pairs(plain_draft, params, 0, runs, seed=3)
    assert chi2_pvalue(counts, exact_joint(target, params), runs) < 1e-6


def test_temperature_zero_is_deterministic():
    decoder = Decoder(TableModel(seed=0), ModelDrafter(TableModel(seed=1)), eos_ids=set())
    runs = {tuple(generated(decoder, [1, 2], Settings(k=3), 30, torch.Generator().manual_seed(s)))
            for s in range(3)}
    assert len(runs) == 1


def test_same_seed_gives_same_sampled_answer():
    decoder = Decoder(TableModel(seed=0), ModelDrafter(TableModel(seed=1)), eos_ids=set())
    settings = Settings(k=3, sampling=SamplingParams(temperature=1.0))
    first = generated(decoder, [1, 2], settings, 30, torch.Generator().manual_seed(7))
    second = generated(decoder, [1, 2], settings, 30, torch.Generator().manual_seed(7))
    assert first == second
