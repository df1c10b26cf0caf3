"""Sampling at the edges of its parameters: temperatures too small for float32 to
divide by are greedy (never NaN), top_p = 0 keeps the top token, and top-k / top-p
give the renormalised distributions worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from specchat.engine import Decoder, ModelDrafter, Round, SamplingParams, Settings
from specchat.engine.sampling import next_token, to_probs
from toy import TableModel, plain_greedy

BIG = torch.tensor([[50.0, 49.0, -3.0, 48.5], [-7.0, 51.0, 50.5, 0.0]])


@pytest.mark.parametrize("temperature", [1e-30, 1e-38, 1e-45, 1e-300])
def test_tiny_temperatures_give_the_argmax_not_nan(temperature):
    probs = to_probs(BIG, SamplingParams(temperature=temperature))
    assert not probs.isnan().any()
    assert probs.tolist() == [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]
    drawn = next_token(BIG, SamplingParams(temperature=temperature), torch.Generator().manual_seed(0))
    assert drawn.tolist() == [0, 1]


def test_a_small_but_usable_temperature_still_samples_a_near_tie():
    """T = 1e-3 on logits 0.0005 apart: ratio e^0.5 between the two, not an argmax."""
    logits = torch.tensor([10.0, 10.0005, -5.0])
    probs = to_probs(logits, SamplingParams(temperature=1e-3))
    assert probs[1] / probs[0] == pytest.approx(math.exp(0.5), rel=1e-3)


def test_speculative_decoding_at_a_tiny_temperature_equals_greedy():
    decoder = Decoder(TableModel(seed=0, scale=20.0), ModelDrafter(TableModel(seed=1, scale=20.0)),
                      eos_ids=set())
    settings = Settings(k=3, sampling=SamplingParams(temperature=1e-40))
    out = [t for e in decoder.generate([1, 2], settings, 25, torch.Generator().manual_seed(0))
           if isinstance(e, Round) for t in e.committed]
    assert out == plain_greedy(TableModel(seed=0, scale=20.0), [1, 2], 25)


def test_top_p_zero_keeps_only_the_top_token():
    probs = to_probs(BIG, SamplingParams(temperature=1.0, top_p=0.0))
    assert probs.tolist() == [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]


def test_top_k_renormalises_over_the_kept_tokens():
    probs = to_probs(torch.tensor([1.0, 0.0, math.log(0.5), -2.0]), SamplingParams(1.0, top_k=2))
    # kept: e^1 and e^0 -> e / (e + 1) and 1 / (e + 1)
    assert probs.tolist() == pytest.approx([0.7310586, 0.2689414, 0.0, 0.0], abs=1e-6)


def test_top_p_keeps_the_smallest_set_reaching_p_and_renormalises():
    probs = to_probs(torch.tensor([math.log(0.5), math.log(0.3), math.log(0.15), math.log(0.05)]),
                     SamplingParams(1.0, top_p=0.75))
    # 0.5 alone is short of 0.75, 0.5 + 0.3 reaches it: keep two, renormalise by 0.8
    assert probs.tolist() == pytest.approx([0.625, 0.375, 0.0, 0.0], abs=1e-6)
