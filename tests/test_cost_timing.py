"""Step costs that a busy machine cannot fake (engine/costs.py: `time_rounds`, `unsteady`,
`steady_costs`; `pairs --check --measure` in commands/advice.py): each model is warmed up
before it is timed, widths and the draft step are timed in interleaved rounds whose medians
count, the rounds' spread is reported, and an unsteady timing (a large spread, or a draft
step c far from the weight-size ratio) is re-timed a bounded number of times and then
withholds the verdict. Fake models advance a fake clock, so nothing here depends on how
busy the test machine is."""

from __future__ import annotations

import pytest
import torch

from specchat.engine import costs
from specchat.engine.costs import Costs, TimedCosts, steady_costs, time_rounds, unsteady
from specchat.engine.drafters import ModelDrafter

CONTEXT = list(range(1, 17))


class FakeClock:
    """Seconds that pass only when a fake model computes."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeModel:
    """A CausalModel whose forward of n tokens costs `step * (1 + slope * (n - 1))` fake
    seconds, times `load()` (a busy machine), and `first_steps_cost` for the first
    `slow_steps` forwards after each prefill (a cold model)."""

    device = torch.device("cpu")
    vocab_size = 8

    def __init__(self, clock: FakeClock, step: float, slope: float = 0.5, slow_steps: int = 0,
                 first_steps_cost: float = 0.0, load=lambda: 1.0):
        self.clock, self.step, self.slope, self.load = clock, step, slope, load
        self.slow_steps, self.first_steps_cost = slow_steps, first_steps_cost
        self.length, self.since_prefill = 0, 0

    @property
    def cache_length(self) -> int:
        return self.length

    def reset(self) -> None:
        self.length = 0

    def crop(self, length: int) -> None:
        self.length = min(self.length, length)

    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        n = int(ids.numel())
        if self.length == 0:  # a prefill: the model is cold again
            self.since_prefill = 0
        elif self.since_prefill < self.slow_steps:
            self.since_prefill += 1
            self.clock.now += self.first_steps_cost
        self.clock.now += self.step * (1 + self.slope * (n - 1)) * self.load()
        self.length += n
        return torch.zeros(keep, self.vocab_size)


def timed(spread: float, c: float = 0.4) -> TimedCosts:
    return TimedCosts(Costs.of({1: 0.05, 2: 0.08}, 0.05 * c), spread, 5, 3)


def test_a_cold_models_first_steps_after_the_prefill_are_never_timed():
    clock = FakeClock()
    target = FakeModel(clock, 0.050, slow_steps=3, first_steps_cost=2.7)
    draft = FakeModel(clock, 0.020, slow_steps=3, first_steps_cost=2.7)
    result = time_rounds(target, ModelDrafter(draft), CONTEXT, widths=(1, 2, 3), rounds=3,
                         repeats=1, clock=clock)
    assert result.costs.target_step_s == pytest.approx(0.050)
    assert result.costs.c == pytest.approx(0.4)  # a 2.7 s cold step would make it 54
    assert result.costs.v(3) == pytest.approx(2.0)
    assert result.spread == pytest.approx(0.0)


def test_behind_prompt_lookup_the_draft_step_is_the_models_not_the_lookups():
    """A pair with `lookup = true` drafts through a LookupFirstDrafter: its c is the draft
    model's step (the lookup's rounds are free and sized apart), not a lookup's microseconds."""
    from specchat.engine.drafters import LookupFirstDrafter, NgramDrafter

    clock = FakeClock()
    target, draft = FakeModel(clock, 0.050), FakeModel(clock, 0.020)
    drafter = LookupFirstDrafter(ModelDrafter(draft), NgramDrafter(3))
    result = time_rounds(target, drafter, CONTEXT, widths=(1, 2), rounds=3, repeats=1,
                         clock=clock)
    assert result.costs.c == pytest.approx(0.4)


def test_a_burst_of_load_lands_in_one_round_the_medians_ignore_it_and_the_spread_shows_it():
    clock, calls = FakeClock(), {"n": 0}
    second_round = range(10, 14)  # after the prefill, the widest step, 3 warm-up steps, round 1

    def burst():  # the target's forwards in the second round run 6 times slower
        calls["n"] += 1
        return 6.0 if calls["n"] in second_round else 1.0

    target = FakeModel(clock, 0.050)
    draft = FakeModel(clock, 0.020)
    target.load = burst
    result = time_rounds(target, ModelDrafter(draft), CONTEXT, widths=(1, 2, 3, 4), rounds=5,
                         repeats=1, clock=clock)
    assert result.costs.target_step_s == pytest.approx(0.050)
    assert [round(result.costs.v(n), 2) for n in (1, 2, 3, 4)] == [1.0, 1.5, 2.0, 2.5]
    assert result.spread == pytest.approx(5.0)  # (6 - 1) / 1 of each width's step
    assert "500% spread" in unsteady(result)


def test_a_draft_step_far_from_the_weight_size_ratio_is_unsteady():
    assert unsteady(timed(0.05, c=0.43), expected_c=0.44) is None
    assert "c = 0.06, far from the weight-size ratio 0.44" in unsteady(timed(0.05, c=0.06), 0.44)
    assert "c = 20.77" in unsteady(timed(0.05, c=20.77), 0.44)
    assert unsteady(timed(0.05, c=0.9), expected_c=0.01) is None  # fixed per-step costs
    assert unsteady(timed(0.05, c=0.06)) is None  # no ratio to hold it to
    assert unsteady(timed(0.30)) == "the machine is busy: 30% spread between repeated timings"


def test_an_unsteady_timing_is_retimed_a_bounded_number_of_times():
    tries = [timed(0.9), timed(0.1)]
    steady, problem = steady_costs(lambda: tries.pop(0), attempts=3)
    assert problem is None and steady.spread == 0.1 and not tries

    calls = []
    noisy = [timed(0.9), timed(0.5), timed(0.7), timed(0.01)]
    best, problem = steady_costs(lambda: calls.append(1) or noisy.pop(0), attempts=3)
    assert len(calls) == 3 and best.spread == 0.5  # the least spread of the three
    assert problem == "the machine is busy: 50% spread between repeated timings"


# --- pairs --check --measure on the tiny pair, with a timer that is noisy or steady -----

def test_check_measure_withholds_its_verdict_when_the_timings_stay_noisy(tiny_config, monkeypatch):
    import random

    from specchat.commands import advice
    from specchat.models.config.pairs import load_catalog

    rng, real, offset = random.Random(0), __import__("time").perf_counter, [0.0]

    def noisy() -> float:  # every reading late by up to a second more than the last
        offset[0] += rng.uniform(0, 1.0)
        return real() + offset[0]

    rounds = []
    monkeypatch.setattr(costs, "time_rounds", lambda *a, **kw: rounds.append(1) or
                        time_rounds(*a, **kw))
    lines = advice.check_lines(load_catalog(tiny_config).get("tiny"), measure=True, clock=noisy)
    text = "\n".join(lines)
    assert len(rounds) == advice.MEASURE_ATTEMPTS, text
    assert "verdict withheld: the machine is busy:" in text and "rerun on a quiet machine" in text
    assert "machine load: " in text and " cores" in text
    assert "which drafter can pay" not in text and "\nhere at α" not in text
    assert "where a verify costs about one step" in text  # predicted, not timed: still shown


def test_check_measure_gives_its_verdict_on_steady_timings(tiny_config):
    from specchat.commands import advice
    from specchat.models.config.pairs import load_catalog

    ticks = [0.0]

    def steady() -> float:  # every timed forward takes exactly half a millisecond
        ticks[0] += 0.0005
        return ticks[0]

    text = "\n".join(advice.check_lines(load_catalog(tiny_config).get("tiny"), measure=True,
                                        clock=steady))
    assert "the rounds spread 0%" in text and "verdict withheld" not in text
    assert "draft step c = 1.00 target steps" in text
    assert "which drafter can pay here" in text and "here at α = 0.50 (assumed)" in text
