"""Every figure on screen is what its label says: the speedup gauge compares with
target-only decoding at the answer's own context lengths and sampling settings,
pauses are not decoding time, the theory is measured independently of the speed it
predicts, and a race that parts says where and how near a tie it was."""

from __future__ import annotations

import dataclasses

import random
import time

import pytest
import torch

from specchat.chat.baseline import Baseline, Costs, SamplingParams, gauge_speedup, merged, theory_for
from specchat.chat.events import AnswerDone, StatsSnapshot, TokenSpan
from specchat.chat.verdict import (IdentityCheck, describe, describe_texts, first_parting,
                                   race_verdict)
from specchat.engine import Round, SpecStats
from specchat.engine.params import K_MAX
from specchat.engine.theory import best_k, break_even_alpha, speedup_at
from toy import TableModel


def step_at(context: int) -> float:
    """A target whose step costs 10 ms at 64 tokens of context and 30 ms at 2,048."""
    return 0.010 + 0.020 * (context - 64) / (2048 - 64)


CURVE = Baseline(SamplingParams(), ((64, step_at(64)), (2048, step_at(2048))),
                 Costs.of({1: 0.010, 2: 0.013, 3: 0.016}, 0.001), 256, 0.0)


def answer_stats(prompt: int, tokens: int, decode_s: float, **extra) -> StatsSnapshot:
    return StatsSnapshot(tokens=tokens, rounds=tokens, prompt_tokens=prompt, first_round_tokens=1,
                         decode_tokens=tokens - 1, decode_s=decode_s,
                         tokens_per_s=(tokens - 1) / decode_s if decode_s else None, **extra)


def test_a_long_context_answer_is_compared_with_target_only_at_its_own_context():
    prompt, tokens = 1700, 361
    plain_s = sum(step_at(c) for c in range(prompt + 1, prompt + tokens))
    stats = answer_stats(prompt, tokens, decode_s=plain_s / 1.3)  # 1.3x faster than target-only
    assert abs(gauge_speedup(stats, CURVE) - 1.3) < 1e-6
    # measured against a short-context baseline the same answer would read slow
    short = answer_stats(0, tokens, decode_s=plain_s / 1.3)
    assert gauge_speedup(short, CURVE) < 0.8


def forward_at(context: int) -> float:
    """The same target's forward alone, as the engine times it in a one-token round."""
    return 0.9 * step_at(context)


LOADED = Baseline(SamplingParams(), ((64, step_at(64)), (2048, step_at(2048))),
                  Costs.of({1: 0.010, 2: 0.013, 3: 0.016}, 0.001), 256, 0.0,
                  forward_points=((64, forward_at(64)), (2048, forward_at(2048))))


def spec_answer(prompt: int, rounds: int, speedup: float, load: float) -> StatsSnapshot:
    """An answer of `rounds` rounds verifying 3 tokens (2 drafts, both accepted), `speedup`
    times faster than target-only, everything `load` times slower than measured idle."""
    contexts = [prompt + 1 + 3 * i for i in range(rounds)]
    tokens = 1 + 3 * rounds
    plain_s = sum(step_at(c) for c in range(prompt + 1, prompt + tokens))
    forward_s = sum(1.6 * forward_at(c) for c in contexts)  # v(3) = 0.016 / 0.010
    draft_s = 2 * rounds * 0.001  # two draft steps a round at the measured 1 ms
    return answer_stats(prompt, tokens, decode_s=load * plain_s / speedup,
                        target_forwards=((3, rounds, sum(contexts), load * forward_s),),
                        decode_drafting=(2 * rounds, load * draft_s))


def test_the_gauge_charges_target_only_the_load_the_answer_ran_under():
    """Drawing the answer (or another program) slows the model: a race at that moment would
    pay the same for its target-only run, so the gauge scales the idle curve by it."""
    idle, busy = spec_answer(300, 100, 1.3, load=1.0), spec_answer(300, 100, 1.3, load=2.0)
    assert LOADED.load_factor(idle) == pytest.approx(1.0)
    assert LOADED.load_factor(busy) == pytest.approx(2.0)
    assert gauge_speedup(idle, LOADED) == pytest.approx(1.3)
    assert gauge_speedup(busy, LOADED) == pytest.approx(1.3)
    assert gauge_speedup(busy, CURVE) == pytest.approx(0.65)  # no idle forwards: no correction


def test_a_load_that_lands_on_the_drafting_counts_too():
    """A frame drawn right after a round is posted stalls the next round's drafting: the
    target's forwards then run at idle speed, and only the whole round shows the load."""
    answer = spec_answer(300, 100, 1.3, load=1.0)
    (_, rounds, contexts, forward_s), = answer.target_forwards
    stalled_draft_s = answer.decode_drafting[1] + 0.5 * (forward_s + answer.decode_drafting[1])
    stalled = StatsSnapshot(**{**answer.__dict__, "decode_drafting": (2 * rounds, stalled_draft_s),
                               "decode_s": 1.5 * answer.decode_s})
    assert LOADED.load_factor(stalled) == pytest.approx(1.5)
    assert gauge_speedup(stalled, LOADED) == pytest.approx(1.3)


def one_pass(slow_at: int | None = None, factor: float = 1.0) -> Baseline:
    """A baseline pass of `LOADED`'s target; the contexts at `slow_at` read `factor`
    times dearer (a spell of another program's load during that part of the pass)."""
    def scaled(points):
        return tuple((c, s * (factor if c == slow_at else 1.0)) for c, s in points)
    return dataclasses.replace(LOADED, step_points=scaled(LOADED.step_points),
                               forward_points=scaled(LOADED.forward_points))


def test_one_slow_pass_at_a_context_does_not_move_the_merged_step_cost():
    baseline = one_pass()
    for slow in (one_pass(slow_at=2048, factor=1.6), one_pass()):
        baseline = merged(baseline, slow)
    assert baseline.passes == 3 and baseline.settled
    assert abs(baseline.step_s(2048) - step_at(2048)) < 1e-9
    assert abs(baseline.idle_forward_s(1, 2048, 1) - forward_at(2048)) < 1e-9


def test_merged_passes_average_the_verify_and_draft_costs_and_keep_the_newer_date():
    older = dataclasses.replace(LOADED, measured_at=1.0)
    newer = dataclasses.replace(LOADED, measured_at=2.0,
                                costs=Costs.of({1: 0.012, 2: 0.015, 3: 0.018, 4: 0.020}, 0.003))
    both = merged(merged(older, older), newer)  # two passes of the older, one of the newer
    assert both.measured_at == 2.0 and not dataclasses.replace(both, passes=2).settled
    assert abs(both.draft_step_s - (2 * 0.001 + 0.003) / 3) < 1e-12
    assert abs(both.costs.verify_s[1] - (2 * 0.010 + 0.012) / 3) < 1e-12
    assert both.costs.verify_s[4] == 0.020  # a width only one pass timed keeps its timing


def test_answer_metrics_sum_the_targets_decode_forwards_by_width():
    from specchat.chat.metrics import AnswerMetrics

    metrics = AnswerMetrics(clock=lambda: 0.0, prompt_tokens=40)

    def round_of(drafted: int, verify_s: float, fed: int) -> Round:
        drafts = tuple(range(drafted))
        return Round(drafts, (), 7, "bonus" if drafted else "target", 0.0, verify_s, drafted, fed)

    metrics.record(round_of(0, 9.0, fed=41))   # the first round carries the prompt: left out
    metrics.record(round_of(2, 0.5, fed=3))    # context 41, commits 3
    metrics.record(round_of(0, 0.2, fed=1))    # context 44, commits 1
    metrics.record(round_of(2, 0.7, fed=3))    # context 45
    metrics.record(round_of(1, 5.0, fed=30))   # fed beyond its drafts (a re-fed prefix): left out
    done = metrics.snapshot()
    assert done.target_forwards == ((1, 1, 44, 0.2), (3, 2, 86, 1.2))
    assert done.decode_drafting == (4, pytest.approx(0.0))


def test_no_speedup_before_a_decode_token_or_without_a_baseline():
    assert gauge_speedup(answer_stats(10, 1, 0.0), CURVE) is None
    assert gauge_speedup(answer_stats(10, 50, 1.0), None) is None


class Ticking:
    """A clock that only moves when told: forwards cost 10 ms, the consumer's pauses 5 s."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def stream_rate(pair, monkeypatch, pause_s: float) -> StatsSnapshot:
    from specchat.chat.session import ChatSession

    clock = Ticking()
    forward = pair.target.forward

    def timed_forward(ids, keep=1):
        clock.now += 0.010
        return forward(ids, keep)

    monkeypatch.setattr(pair.target, "forward", timed_forward)
    session = ChatSession(pair, seed=0)
    session.clock = clock
    session.speculate = False
    done = None
    for event in session.answer("Tell me about foxes", max_new_tokens=12):
        clock.now += pause_s  # step mode / slow motion: the consumer holds the stream
        done = event
    monkeypatch.undo()
    return done.stats


def test_pauses_of_step_mode_and_slow_motion_are_not_decoding_time(load_tiny, monkeypatch):
    pair = load_tiny("tiny")
    paused = stream_rate(pair, monkeypatch, pause_s=5.0)
    unpaused = stream_rate(pair, monkeypatch, pause_s=0.0)
    assert paused.decode_tokens == unpaused.decode_tokens >= 5
    assert abs(paused.tokens_per_s - 100.0) < 1e-6  # one token per 10 ms forward
    assert abs(paused.tokens_per_s - unpaused.tokens_per_s) < 1e-6
    assert abs(paused.decode_s - 0.010 * paused.decode_tokens) < 1e-9


class SlowerWithContext(TableModel):
    """A toy target whose forward costs 2 ms plus 40 µs per cached token, per new token."""

    def forward(self, ids, keep=1):
        time.sleep(ids.numel() * (0.002 + 4e-5 * self.cache_length))
        return super().forward(ids, keep)


def test_the_baseline_measures_step_costs_that_grow_with_the_context(load_tiny):
    from types import SimpleNamespace

    from specchat.chat.baseline_timing import measure_baseline
    from specchat.engine import SamplingParams

    tokenizer = load_tiny("tiny").tokenizer
    target = SlowerWithContext(vocab_size=len(tokenizer))
    pair = SimpleNamespace(target=target, draft=None, tokenizer=tokenizer, context_length=2048)
    baseline = measure_baseline(pair, SamplingParams(0.7), contexts=(64, 1024))
    assert baseline.sampling == SamplingParams(0.7)
    # the sleeps alone cost 4.6 ms a token at 64 tokens of context and 43 ms at 1,024 (9.4x);
    # a busy machine adds the same per-token overhead to both, which lowers the ratio
    assert baseline.step_s(1024) >= 0.043
    assert baseline.step_s(1024) / baseline.step_s(64) > 2.5
    assert baseline.v(9) > 5  # nine tokens through a forward that costs per token
    (short, short_s), (long, long_s) = baseline.forward_points
    assert (short, long) == (64, 1024) and 0.043 <= long_s <= baseline.step_s(1024)
    assert short_s < long_s / 3


def test_an_answer_on_a_slowed_target_reads_its_load_and_an_idle_one_does_not(load_tiny):
    from types import SimpleNamespace

    from specchat.chat.baseline_timing import measure_baseline
    from specchat.chat.session import ChatSession
    from specchat.engine import SamplingParams

    tiny = load_tiny("tiny-plain")
    target = SlowerWithContext(vocab_size=len(tiny.tokenizer))
    pair = SimpleNamespace(target=target, draft=None, tokenizer=tiny.tokenizer,
                           context_length=2048, config=tiny.config, eos_ids=set())
    baseline = measure_baseline(pair, SamplingParams(), contexts=(64, 512))

    def load_of(slowdown: float) -> float:
        forward = SlowerWithContext.forward

        def slowed(self, ids, keep=1):
            time.sleep((slowdown - 1) * ids.numel() * (0.002 + 4e-5 * self.cache_length))
            return forward(self, ids, keep)

        target.forward = slowed.__get__(target)
        session = ChatSession(pair, seed=0)
        session.speculate = False
        *_, done = session.answer("Tell me about foxes " * 20, max_new_tokens=16)
        del target.forward
        return baseline.load_factor(done.stats)

    assert 0.7 < load_of(1.0) < 1.4
    assert 1.6 < load_of(2.0) < 2.6


def test_a_stopped_measurement_gives_no_baseline(load_tiny):
    from specchat.chat.baseline_timing import measure_baseline
    from specchat.engine import SamplingParams

    pair = load_tiny("tiny-plain")
    assert measure_baseline(pair, SamplingParams(), should_stop=lambda: True) is None


# ----- the theory line ------------------------------------------------------------------


def simulated_rounds(alpha: float, rounds: int, seed: int = 0) -> list[Round]:
    """Rounds with per-token acceptance α; some clipped by the budget, some drafting nothing."""
    rng = random.Random(seed)
    out = []
    for _ in range(rounds):
        k = rng.choice([0, 1, 2, 4, 4, 4])
        accepted = 0
        while accepted < k and rng.random() < alpha:
            accepted += 1
        drafts = tuple(range(k))
        token_kind = "target" if k == 0 else ("bonus" if accepted == k else "resampled")
        out.append(Round(drafts[:accepted], drafts[accepted:], 7, token_kind, 0.0, 0.0, k, k + 1))
    return out


def test_alpha_comes_from_acceptance_events_whatever_the_rounds_drafted():
    stats = SpecStats()
    for event in simulated_rounds(0.7, 4000):
        stats.update(event)
    assert abs(stats.alpha - 0.7) < 0.02
    # a last round clipped to k = 1 and fully accepted moves it by almost nothing
    stats.update(Round((3,), (), 4, "bonus", 0.0, 0.0, 1, 2))
    assert abs(stats.alpha - 0.7) < 0.02


def test_the_theory_does_not_move_with_the_answers_speed():
    stats = dict(alpha=0.6, drafting_rounds=81, k_in_use=2)
    fast = theory_for(answer_stats(100, 81, 0.5, **stats), CURVE)
    slow = theory_for(answer_stats(100, 81, 50.0, **stats), CURVE)
    assert fast == slow and fast.ideal > 1.0


def test_best_k_is_zero_where_drafting_cannot_pay():
    costly = lambda n: 1.0 + 0.6 * (n - 1)  # verifying 2 tokens costs 1.6 steps
    assert best_k(0.3, 0.4, costly)[0] == 0
    assert best_k(0.95, 0.02, lambda n: 1.0)[0] == K_MAX  # free verifies: the longest allowed


def test_at_the_break_even_alpha_speculation_neither_wins_nor_loses():
    verify = lambda n: 1.0 + 0.3 * (n - 1)
    alpha = break_even_alpha(2, 0.1, verify)
    assert 0.0 < alpha < 1.0
    assert abs(speedup_at(alpha, 2, 0.1, verify) - 1.0) < 1e-4
    assert break_even_alpha(2, 1.0, lambda n: float(n)) is None  # costs more than it can commit


def test_time_per_token_leaves_out_the_round_that_carried_the_prompt():
    stats = SpecStats()
    stats.update(Round((), (), 5, "target", 0.0, 2.0, 0, 300))  # prefill of 300 tokens
    for _ in range(50):
        stats.update(Round((), (), 5, "target", 0.0, 0.02, 0, 1))
    assert stats.token_time_percentile(0.99) < 0.05
    assert stats.verify_by_width == {1: (50, stats.verify_by_width[1][1])}


# ----- the race's verdict ---------------------------------------------------------------


def done_with(ids: list[int], margins: list[float]) -> AnswerDone:
    spans = tuple(TokenSpan(f"t{i}", "target", i, m) for i, m in zip(ids, margins))
    return AnswerDone("", "eos", StatsSnapshot(tokens_per_s=10.0), spans)


def test_a_near_tie_in_bfloat16_is_named_rounding_and_a_clear_choice_a_bug():
    spec = done_with([1, 2, 3, 4], [3.0, 2.0, 0.125, 1.0])
    plain = done_with([1, 2, 9, 4], [3.0, 2.0, 0.0, 1.0])
    verdict = race_verdict(spec, plain, 1.2, greedy=True, dtype="bfloat16")
    assert verdict.parting.index == 2
    assert "token 3" in describe_texts(verdict) and "rounding" in describe_texts(verdict)
    clear = race_verdict(done_with([1, 2, 3], [3.0, 2.0, 1.5]), done_with([1, 2, 9], [3.0, 2.0, 1.4]),
                         None, greedy=True, dtype="bfloat16")
    assert "bug" in describe_texts(clear)
    in_float32 = race_verdict(spec, plain, None, greedy=True, dtype="float32")
    assert "bug" in describe_texts(in_float32)


def test_a_near_tie_on_llama_cpp_is_named_its_kernels_and_a_clear_choice_a_bug():
    """Seen in the chat on the default pair (Q4_1): parting at margins 0.016 and 0.103."""
    spec = done_with([1, 2, 3, 4], [3.0, 2.0, 0.016, 1.0])
    plain = done_with([1, 2, 9, 4], [3.0, 2.0, 0.103, 1.0])
    text = describe_texts(race_verdict(spec, plain, 0.9, greedy=True, dtype="Q4_1"))
    assert "near-tie" in text and "llama.cpp (Q4_1)" in text and "not a bug" in text
    clear = race_verdict(done_with([1, 2, 3], [3.0, 2.0, 1.5]), done_with([1, 2, 9], [3.0, 2.0, 1.4]),
                         None, greedy=True, dtype="Q4_1")
    assert "this is a bug" in describe_texts(clear)


def run_under_load(load: float, speculative: bool) -> AnswerDone:
    """An answer whose rounds ran `load` times slower than LOADS_BASELINE measured them idle:
    ten 3-token verifies and twenty draft steps, or thirty one-token steps (a race)."""
    if speculative:
        forwards, drafting = ((3, 10, 640, 10 * 0.080 * load),), (20, 20 * 0.010 * load)
    else:
        forwards, drafting = ((1, 30, 1920, 30 * 0.050 * load),), (0, 0.0)
    stats = StatsSnapshot(tokens_per_s=10.0, target_forwards=forwards, decode_drafting=drafting)
    return AnswerDone("", "eos", stats, done_with([1, 2], [1.0, 1.0]).spans)


LOADS_BASELINE = Baseline(SamplingParams(), ((64, 0.050),),
                          Costs.of({1: 0.050, 2: 0.065, 3: 0.080}, 0.010), 64,
                          forward_points=((64, 0.050),))


def test_a_race_names_the_load_each_run_ran_under_and_says_when_it_moved():
    """Seen in the chat: a short answer gauged 0.65x ran at load 1.67 of idle, its race at
    2.53, and raced 0.97x; the gauge charges target-only the answer's load."""
    steady = race_verdict(run_under_load(1.6, True), run_under_load(1.7, False), 0.7, True,
                          "float32", LOADS_BASELINE)
    assert steady.answer_load == pytest.approx(1.6) and steady.race_load == pytest.approx(1.7)
    assert "load ×1.60 of idle; the race ran at ×1.70" in describe(steady)
    assert "moved" not in describe(steady)
    moved = race_verdict(run_under_load(1.67, True), run_under_load(2.53, False), 0.65, True,
                         "float32", LOADS_BASELINE)
    assert "×2.53" in describe(moved) and "load moved" in describe(moved)
    unknown = race_verdict(run_under_load(1.0, True), run_under_load(2.0, False), 0.65, True,
                           "float32")
    assert "(the gauge estimated 0.65×)" in describe(unknown)


def test_identical_texts_and_sampled_runs_are_said_for_what_they_are():
    same = done_with([1, 2, 3], [1.0, 1.0, 1.0])
    assert first_parting(same, same) is None
    assert "identical" in describe_texts(race_verdict(same, same, None, True, "bfloat16"))
    other = done_with([1, 5], [1.0, 1.0])
    assert "run to run" in describe_texts(race_verdict(same, other, None, False, "bfloat16"))
    assert first_parting(same, done_with([1, 2], [1.0, 1.0])).index == 2
    assert "identical over 3 tokens" in IdentityCheck(3, None).describe()


def test_each_committed_token_carries_the_targets_top_two_margin(load_tiny):
    from specchat.chat.conversation import render_prompt
    from specchat.chat.session import ChatSession

    pair = load_tiny("tiny")
    session = ChatSession(pair, seed=0)
    done = [e for e in session.answer("Tell me about foxes", max_new_tokens=8)][-1]
    prompt = render_prompt(pair.tokenizer, [{"role": "user", "content": "Tell me about foxes"}])
    ids = [s.token_id for s in done.spans if s.kind != "rejected"]
    model = pair.target
    for i, span in enumerate(s for s in done.spans if s.kind != "rejected"):
        model.reset()
        logits = model.forward(torch.tensor(prompt + ids[:i]), keep=1)[0]
        top = logits.topk(2).values
        assert abs(span.margin - float(top[0] - top[1])) < 1e-3, i
    model.reset()


def test_the_theory_line_says_when_no_k_can_pay_before_any_drafting():
    from specchat.tui.gauges import theory_line

    verify = {n: 0.012 * (0.7 * n + 0.3) for n in range(1, 10)}
    dear = Baseline(SamplingParams(), ((64, 0.012),), Costs.of(verify, 0.0084), 256,
                    0.0)  # the default pair on llama.cpp, 2 cores: c 0.70, v(2) 1.70
    cheap = dataclasses.replace(dear, costs=Costs.of({1: 0.012, 2: 0.013, 3: 0.014}, 0.001))
    plain = answer_stats(40, 50, decode_s=0.6)
    assert "no k pays here" in theory_line(plain, dear) and "c 0.70" in theory_line(plain, dear)
    assert theory_line(plain, cheap) == "theory: – (no drafting yet)"


def test_an_answer_decoded_in_under_a_second_shows_no_speedup_but_says_why():
    from specchat.tui.gauges import speedup_line

    prompt = 100
    brief = answer_stats(prompt, 9, decode_s=0.4)   # 8 decode tokens in 0.4 s: noise, not a figure
    longer = answer_stats(prompt, 60, decode_s=2.0)
    assert gauge_speedup(brief, CURVE) is None
    assert gauge_speedup(longer, CURVE) is not None
    line = speedup_line(brief, CURVE, "speculative", None, None)
    assert "too short to measure: 0.4 s of decoding" in line
