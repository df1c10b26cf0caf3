"""Adaptive draft length (k = "auto"): the policy's α and cost estimates, its
choices in clear-cut situations, and "auto" wired through models.toml, -k and the
engine's Settings hook."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from specchat.engine import Decoder, Finished, NgramDrafter, Round, SamplingParams
from specchat.engine.adaptive import AcceptanceEstimate, AdaptiveK, CostModel, settings_for


def make_round(drafted: int, accepted: int, draft_s: float, verify_s: float, k: int = 4) -> Round:
    drafts = tuple(range(10, 10 + drafted))
    kind = "target" if not drafted else ("bonus" if accepted == drafted else "resampled")
    return Round(drafts[:accepted], drafts[accepted:], 1, kind, draft_s, verify_s, k)


def test_acceptance_estimate_follows_full_accepts_up_and_rejections_down():
    estimate = AcceptanceEstimate()
    start = estimate.alpha
    for _ in range(20):
        estimate.observe(drafted=6, accepted=6)
    assert estimate.alpha > 0.95 > start
    for _ in range(60):
        estimate.observe(drafted=6, accepted=0)
    assert estimate.alpha < 0.1


def test_cost_model_fits_unmeasured_verify_widths_from_measured_ones():
    costs = CostModel()
    for _ in range(5):
        costs.observe(0, 0.0, 0.010)      # width 1
        costs.observe(4, 0.004, 0.014)    # width 5
    assert costs.verify_cost(1) == pytest.approx(0.010)
    assert costs.verify_cost(3) == pytest.approx(0.012, rel=0.01)
    assert costs.verify_cost(9) == pytest.approx(0.018, rel=0.01)
    assert costs.round_cost(4) == pytest.approx(4 * 0.001 + 0.014)


def drive(policy: AdaptiveK, accept_all: bool, draft_cost: float, rounds: int = 60) -> int:
    for _ in range(rounds):
        k = policy()
        accepted = k if accept_all else 0
        policy.observe(make_round(k, accepted, draft_cost * k, 0.010 + 0.0005 * k, k))
    return policy()


def test_cheap_drafts_that_are_always_accepted_push_k_to_the_maximum():
    assert drive(AdaptiveK(k_max=8), accept_all=True, draft_cost=0.0001) == 8


def test_drafts_that_are_never_accepted_push_k_down_to_one():
    policy = AdaptiveK(k_max=8)
    assert drive(policy, accept_all=False, draft_cost=0.003) == 1
    assert policy.history[-20:] == [1] * 20


def test_expensive_drafts_choose_a_shorter_k_than_cheap_ones_at_the_same_alpha():
    def settle(draft_cost):
        policy = AdaptiveK(k_max=8)
        for i in range(80):
            k = policy()
            accepted = min(k, 2)  # a rejection after two accepts: alpha around 2/3
            policy.observe(make_round(k, accepted, draft_cost * k, 0.010 + 0.0005 * k, k))
        return policy()

    assert settle(0.006) < settle(0.0001)


def test_engine_calls_the_policy_every_round_and_feeds_it_the_round(load_tiny):
    pair = load_tiny("tiny-ngram")
    settings = settings_for("auto", SamplingParams())
    prompt = [5, 6, 7, 8, 9] * 6
    events = list(Decoder(pair.target, NgramDrafter(3), pair.eos_ids).generate(prompt, settings, 30))
    rounds = [e for e in events if isinstance(e, Round)]
    assert isinstance(events[-1], Finished)
    assert len(settings.k_policy.history) == len(rounds)
    assert settings.k_policy.costs.verify  # it saw verify timings


def test_auto_k_keeps_greedy_output_identical_to_target_only(load_tiny):
    pair = load_tiny("tiny")
    prompt = list(range(4, 30))

    def ids(settings, drafter):
        events = Decoder(pair.target, drafter, pair.eos_ids).generate(prompt, settings, 30)
        return [t for e in events if isinstance(e, Round) for t in e.committed]

    reference = ids(settings_for(0, SamplingParams()), None)
    assert ids(settings_for("auto", SamplingParams()), pair.drafter) == reference


def test_models_toml_accepts_k_auto_and_rejects_other_words(tmp_path, tiny_config):
    from specchat.errors import ConfigError
    from specchat.models.config import load_catalog

    good = tmp_path / "good.toml"
    good.write_text('[pairs.a]\ntarget = "x"\nk = "auto"\n')
    assert load_catalog(good).get("a").k == "auto"
    bad = tmp_path / "bad.toml"
    bad.write_text('[pairs.a]\ntarget = "x"\nk = "fast"\n')
    with pytest.raises(ConfigError, match="auto"):
        load_catalog(bad)


def test_run_accepts_k_auto_and_rejects_other_words(tiny_config):
    from specchat.cli import main

    ok = CliRunner().invoke(main, ["run", "--config", str(tiny_config), "-k", "auto",
                                   "--max-new-tokens", "8", "hello"])
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(main, ["run", "--config", str(tiny_config), "-k", "lots", "hello"])
    assert bad.exit_code == 2 and "auto" in bad.output
