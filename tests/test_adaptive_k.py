"""Adaptive draft length (k = "auto"): the policy's α and cost estimates, its
choices in clear-cut situations, and "auto" wired through models.toml, -k and the
engine's Settings hook."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner

from specchat.chat.decoding import drafter_for
from specchat.engine import Decoder, Finished, NgramDrafter, Round, SamplingParams
from specchat.engine.adaptive import AcceptanceEstimate, AdaptiveK, CostModel, settings_for


def make_round(drafted: int, accepted: int, draft_s: float, verify_s: float, k: int = 4,
               prefill: int = 0) -> Round:
    drafts = tuple(range(10, 10 + drafted))
    kind = "target" if not drafted else ("bonus" if accepted == drafted else "resampled")
    return Round(drafts[:accepted], drafts[accepted:], 1, kind, draft_s, verify_s, k,
                 fed=drafted + 1 + prefill)


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


def test_drafts_that_are_never_accepted_stop_speculation_but_keep_probing():
    policy = AdaptiveK(k_max=8)
    drive(policy, accept_all=False, draft_cost=0.003, rounds=300)
    late = policy.history[-150:]
    assert late.count(0) > 0.9 * len(late)
    first_plain = policy.history.index(0)
    probes = [i for i, k in enumerate(policy.history) if k > 0 and i > first_plain]
    gaps = [b - a for a, b in zip(probes, probes[1:])]
    assert gaps == sorted(gaps) and gaps[-1] >= 4 * gaps[0]  # rarer while they keep failing


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
    assert ids(settings_for("auto", SamplingParams()), drafter_for(pair)) == reference


def test_models_toml_accepts_k_auto_and_rejects_other_words(tmp_path, tiny_config):
    from specchat.errors import ConfigError
    from specchat.models.config.pairs import load_catalog

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


# --- through the engine, on a fake clock: forwards cost base + per-token time -----------

from specchat.engine import ModelDrafter, Settings  # noqa: E402
from toy import FakeClock, TimedTableModel, use_fake_clock  # noqa: E402


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    return use_fake_clock(monkeypatch)


def timed_pair(clock, draft_base: float, agree: bool):
    """A target costing 1 + 0.05 per token fed and a draft that always (agree) or never
    (its tables negated: its argmax is the target's argmin) picks the target's token."""
    target = TimedTableModel(clock, 1.0, 0.05, seed=3)
    draft = TimedTableModel(clock, draft_base, 0.001, seed=4).copy_tables_from(target)
    if not agree:
        draft.t1, draft.t2 = -draft.t1, -draft.t2
    return target, draft


def auto_rounds(target, draft, prompt, n, policy=None, each_round=lambda i: None):
    policy = policy or AdaptiveK(k_max=8)
    settings = Settings(policy.k_start, SamplingParams(), policy)
    sequence, rounds = list(prompt), []
    for event in Decoder(target, ModelDrafter(draft), eos_ids=set()).generate(prompt, settings, n):
        if isinstance(event, Round):
            sequence += event.committed
            assert draft.fed == sequence[: len(draft.fed)]  # the draft's cache is a committed prefix
            rounds.append(event)
            each_round(len(rounds))
    return rounds, policy


def test_a_long_prompt_does_not_lock_auto_k_low(clock, monkeypatch):
    """The first round's verify and draft carry the prompt's last chunk (up to a thousand
    tokens on a fast model); costs learned from that round make wide verifies look dear and
    pin k at 1-2. Both prompts end in the same two tokens, so the toy answers them
    identically: auto must settle on the same k after either."""
    from specchat.engine import decoder

    monkeypatch.setattr(decoder, "PREFILL_FIRST_CHUNK", 2000)  # 3,000 tokens: 2,000 + 1,000
    monkeypatch.setattr(decoder, "PREFILL_CHUNK_RANGE", (1000, 4000))  # as fast as a GPU

    def settled_k(prompt):
        target = TimedTableModel(clock, 1.0, 0.05, seed=3)
        draft = TimedTableModel(clock, 0.02, 0.001, seed=4).copy_tables_from(target)
        draft.t1 += torch.randn(draft.t1.shape, generator=torch.Generator().manual_seed(1))
        rounds, _ = auto_rounds(target, draft, prompt, 150)
        assert 0.3 < sum(len(e.accepted) for e in rounds) / sum(e.drafted for e in rounds) < 0.8
        return rounds[0].fed, [e.k for e in rounds[-11:-1]]

    short_fed, short_k = settled_k([1, 2])
    long_fed, long_k = settled_k([1, 2] * 1500)
    assert long_fed > 1000 > short_fed  # its first round carries the prompt's last chunk
    assert long_k == short_k and min(short_k) >= 4


def test_auto_stops_speculating_when_the_draft_never_agrees_and_costs_time(clock):
    target, draft = timed_pair(clock, draft_base=0.3, agree=False)
    rounds, policy = auto_rounds(target, draft, [1, 2, 3], 300)
    late = rounds[100:]
    assert sum(e.drafted == 0 for e in late) > 0.9 * len(late)
    assert any(e.drafted for e in late)  # still probing now and then
    assert policy.probe_every > 4


def test_auto_drafts_when_the_draft_always_agrees_and_is_cheap(clock):
    target, draft = timed_pair(clock, draft_base=0.02, agree=True)
    rounds, _ = auto_rounds(target, draft, [1, 2, 3], 200)
    assert all(e.drafted >= 4 for e in rounds[10:-1])


def test_probing_brings_speculation_back_when_the_draft_starts_agreeing(clock):
    target, draft = timed_pair(clock, draft_base=0.3, agree=False)

    def start_agreeing(i):
        if i == 150:
            draft.copy_tables_from(target)

    rounds, _ = auto_rounds(target, draft, [1, 2, 3], 700, each_round=start_agreeing)
    assert sum(e.drafted == 0 for e in rounds[100:150]) > 45  # plain before the change
    after = rounds[230:-1]
    assert len(after) > 20 and all(e.drafted == 8 for e in after)


def test_auto_stops_probing_where_costs_alone_rule_speculation_out(clock):
    """A verify of n tokens costing n plain steps (llama.cpp on a small CPU): even a draft
    that is always accepted cannot pay, so re-probing after every full accept (as when
    acceptance might come back) would only lose time. Probes become rare re-checks."""
    target = TimedTableModel(clock, 0.01, 1.0, seed=3)
    draft = TimedTableModel(clock, 0.1, 0.001, seed=4).copy_tables_from(target)
    rounds, policy = auto_rounds(target, draft, [1, 2, 3], 600)
    assert not policy.can_pay()
    drafting = [i for i, e in enumerate(rounds) if e.drafted]
    assert len(drafting) <= 6, drafting
    assert all(len(e.accepted) == e.drafted for e in rounds if e.drafted)  # it was never α


def test_auto_measures_a_plain_step_before_trusting_its_prior_for_one():
    policy = AdaptiveK(k_max=8)
    ks = []
    for i in range(3):
        k = policy()
        ks.append(k)
        policy.observe(make_round(k, k, 0.001 * k, 0.010 * (k + 1), k, prefill=40 if i == 0 else 0))
    assert ks[:2] == [4, 4] and ks[2] == 0


def test_a_plain_step_timed_on_a_busy_moment_does_not_keep_speculation_on():
    """Plain steps timed 5x dear for a while (the machine was busy) make drafting look
    worth it; verifying n tokens really costs n steps, so once a plain step is measured
    afresh, speculation must stop."""
    policy = AdaptiveK(k_max=4)
    for i in range(400):
        k = policy()
        busy = i < 30 and k == 0
        verify = 0.010 * (k + 1) * (5 if busy else 1)
        policy.observe(make_round(k, k, 0.001 * k, verify, k, prefill=40 if i == 0 else 0))
    assert policy.history[:30].count(0) < 10  # drafting looked worth it while plain was dear
    assert policy.history[-100:].count(0) > 95


# --- robust costs and a measured prior ---------------------------------------------------

from specchat.engine.costs import Costs  # noqa: E402


def test_one_slow_moment_does_not_move_a_learned_cost():
    """Eight plain steps of 10 ms and one of 40 ms (the machine was busy for a moment): the
    cost stays 10 ms. A running mean would read 16 ms, enough to make speculation look
    worth it where it is not."""
    costs = CostModel()
    for seconds in [0.010] * 8 + [0.040]:
        costs.observe(0, 0.0, seconds)
    assert costs.verify_cost(1) == pytest.approx(0.010)


def test_a_prior_gives_untimed_widths_its_shape_at_the_live_level():
    """BaselineMeasured: v(1) = 10 ms, v(5) = 30 ms. The answer runs twice as slow (20 ms plain
    steps, a longer context): a 5-token verify is expected at 60 ms, not the prior's 30."""
    costs = CostModel(Costs.of({1: 0.010, 5: 0.030}, draft_step_s=0.004))
    for _ in range(5):
        costs.observe(0, 0.0, 0.020)
    assert costs.verify_cost(5) == pytest.approx(0.060)
    assert costs.draft_cost() == pytest.approx(0.008)  # the draft slowed down alike


def test_a_width_timed_often_enough_costs_its_own_median_over_the_prior():
    costs = CostModel(Costs.of({1: 0.010, 3: 0.012}, None))
    for _ in range(3):
        costs.observe(2, 0.002, 0.030)  # width 3 verifies really cost 30 ms
    assert costs.verify_cost(3) == pytest.approx(0.030)


def llama_cpp_like_prior() -> Costs:
    """This CPU's default pair, its baseline costs (2026-11-23): v(n) = 1, 1.7, 2.4, ... steps,
    a draft step 0.7 of a target step: no k pays even at full acceptance."""
    step = 0.012
    return Costs.of({n: step * (0.7 * n + 0.3) for n in range(1, 10)}, draft_step_s=0.7 * step)


def test_with_a_prior_where_no_k_can_pay_an_answer_starts_plain_and_never_feeds_the_draft():
    policy = AdaptiveK(k_max=8, prior=llama_cpp_like_prior())
    ks = []
    for i in range(1000):
        k = policy()
        ks.append(k)
        verify = llama_cpp_like_prior().verify_s[k + 1]
        policy.observe(make_round(k, k, 0.0084 * k, verify, k, prefill=40 if i == 0 else 0))
    assert ks == [0] * 1000  # no probe either: it would only feed the draft the whole context
    assert not policy.can_pay()


def test_with_a_prior_where_drafts_pay_an_answer_drafts_from_its_first_round():
    cheap = Costs.of({n: 0.010 * (1 + 0.05 * (n - 1)) for n in range(1, 10)}, draft_step_s=0.0005)
    policy = AdaptiveK(k_max=8, prior=cheap)
    assert policy() >= 2


def test_a_chat_with_k_auto_times_the_step_costs_once_before_its_first_answer(load_tiny, monkeypatch):
    from specchat.chat import baseline_timing
    from specchat.chat.session import ChatSession

    pair = load_tiny("tiny")
    timed = []
    real = baseline_timing.measure_baseline_costs
    monkeypatch.setattr(baseline_timing, "measure_baseline_costs",
                        lambda *a, **kw: timed.append(1) or real(*a, **kw))
    session = ChatSession(pair, settings=settings_for("auto", SamplingParams()), seed=0)
    for question in ("hello", "and again"):
        events = list(session.answer(question, max_new_tokens=12))
        assert events[-1].stats.tokens > 0
    assert timed == [1]
    assert session.settings.k_policy.has_prior
    assert session.settings_copy().k_policy.has_prior  # a race's fresh policy starts from it too


def test_ttft_counts_the_seconds_an_answer_waits_for_k_autos_step_costs(load_tiny, monkeypatch):
    """Where an answer must time k = "auto"'s step costs first (k became auto after the pair
    loaded), the user waits for it: those seconds are the answer's TTFT, not hidden before it."""
    import time

    from specchat.chat import baseline_timing
    from specchat.chat.session import ChatSession

    pair = load_tiny("tiny")
    waited = [0.0]
    real = baseline_timing.measure_baseline_costs

    def five_seconds_on_the_sessions_clock(*args, **kwargs):
        waited[0] += 5.0
        return real(*args, **kwargs)

    monkeypatch.setattr(baseline_timing, "measure_baseline_costs",
                        five_seconds_on_the_sessions_clock)
    session = ChatSession(pair, settings=settings_for("auto", SamplingParams()), seed=0)
    session.clock = lambda: time.perf_counter() + waited[0]
    *_, done = session.answer("hello", max_new_tokens=6)
    assert waited == [5.0]
    assert 5.0 <= done.stats.ttft_s < 10.0


def test_loading_a_k_auto_pair_for_the_chat_times_its_step_costs_so_no_answer_waits(
        tiny_config, monkeypatch):
    import dataclasses

    from specchat.chat import baseline_timing
    from specchat.chat.pair_service import PairService
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    config = dataclasses.replace(load_catalog(tiny_config).get("tiny"), k="auto")
    timed, notes = [], []
    real = baseline_timing.measure_baseline_costs
    monkeypatch.setattr(baseline_timing, "measure_baseline_costs",
                        lambda *a, **kw: timed.append("timed") or real(*a, **kw))
    service = PairService("tiny", lambda dtype, progress: load_pair(config, progress=progress))
    service.load(notes.append)
    assert timed == ["timed"] and "timing step costs for k = auto" in notes
    *_, done = service.answer("hello", True, lambda: False)
    assert done.stats.tokens > 0 and timed == ["timed"]


def test_a_question_stops_the_baseline_while_it_times_step_costs(load_tiny, monkeypatch):
    """The baseline measurement times the step costs last (seconds on a CPU, uninterrupted before):
    a question asked meanwhile gets the model after the timer's prefill and warm-up, before
    a single width is timed."""
    from specchat.chat import baseline_timing
    from specchat.engine.costs import WARMUP_STEPS

    pair = load_tiny("tiny")
    asked, forwards = [], []
    real_context, real_forward = baseline_timing.baseline_costs_context, pair.target.forward

    def question_arrives(p):
        asked.append(True)
        return real_context(p)

    def counted(ids, keep=1):
        forwards.append(bool(asked))
        return real_forward(ids, keep)

    monkeypatch.setattr(baseline_timing, "baseline_costs_context", question_arrives)
    monkeypatch.setattr(pair.target, "forward", counted)
    assert baseline_timing.measure_baseline(pair, SamplingParams(), should_stop=lambda: bool(asked),
                                      contexts=(64,)) is None
    assert asked and 0 < forwards.count(True) <= 2 + WARMUP_STEPS  # prefill, widest, warm-up
    assert pair.target.cache_length == 0  # left empty for the answer


def test_target_only_answers_and_fixed_k_time_no_step_costs(load_tiny, monkeypatch):
    from specchat.chat import baseline_timing
    from specchat.chat.session import ChatSession

    pair = load_tiny("tiny")
    monkeypatch.setattr(baseline_timing, "measure_baseline_costs",
                        lambda *a, **kw: pytest.fail("timed costs"))
    auto = ChatSession(pair, settings=settings_for("auto", SamplingParams()), seed=0)
    auto.speculate = False
    list(auto.answer("hello", max_new_tokens=6))
    list(ChatSession(pair, settings=settings_for(2, SamplingParams()), seed=0).answer("hi", 6))


def test_timed_verify_costs_never_make_a_wider_forward_cheaper():
    from specchat.engine.costs import monotone

    assert monotone({1: 0.010, 2: 0.0011, 3: 0.016}) == {1: 0.010, 2: 0.010, 3: 0.016}


def edited_copy(code: list[int], every: int, fresh: int) -> list[int]:
    """`code` with every `every`-th token replaced by `fresh`: an edit that rewrites a
    function it was given (a rename), as the `edit` prompts ask."""
    return [fresh if i % every == every - 1 else t for i, t in enumerate(code)]


def ngram_answer_seconds(clock, k, base: float, per_token: float) -> tuple[float, list[int]]:
    """Fake seconds to decode an edited copy of the prompt's code with the n-gram lookup at
    `k` (an int, or "auto"), and the answer's committed ids."""
    from types import SimpleNamespace

    from specchat.chat.decoding import decoder_for

    code = torch.randint(10, 60, (120,), generator=torch.Generator().manual_seed(5)).tolist()
    prompt = [1, 2, 3] + code + [4]
    answer = edited_copy(code, every=12, fresh=61) + [7]
    target = ScriptedModel(prompt + answer, clock, base, per_token)
    pair = SimpleNamespace(target=target, draft=SimpleNamespace(max_ngram=3, min_ngram=2),
                           eos_ids={7})
    settings = settings_for(k, SamplingParams(), k_max=16)
    started, ids = clock.now, []
    for event in decoder_for(pair, settings=settings).generate(prompt, settings, 200):
        if isinstance(event, Round):
            ids += event.committed
    assert ids == answer  # lossless whatever the drafting
    return clock.now - started, ids


def test_auto_k_sizes_ngram_proposals_by_what_a_verify_costs(clock):
    """Where a verify of n tokens costs about n/2 plain steps (llama.cpp on a small CPU),
    a long n-gram proposal that breaks at an edit wastes most of its verify: k = "auto"
    proposes shorter and beats both plain decoding and the fixed k = 12 window. Where a
    verify costs about one step (a GPU), it proposes long."""
    cpu = dict(base=0.45, per_token=0.55)
    plain, _ = ngram_answer_seconds(clock, 0, **cpu)
    fixed, _ = ngram_answer_seconds(clock, 12, **cpu)
    auto, _ = ngram_answer_seconds(clock, "auto", **cpu)
    assert auto < 0.93 * plain and auto < 0.9 * fixed
    gpu = dict(base=1.0, per_token=0.01)
    plain, _ = ngram_answer_seconds(clock, 0, **gpu)
    fixed, _ = ngram_answer_seconds(clock, 12, **gpu)
    auto, _ = ngram_answer_seconds(clock, "auto", **gpu)
    assert auto < 0.4 * plain and auto < 0.9 * fixed



def test_k_auto_reaches_the_one_maximum_from_a_prior_timed_only_to_prior_k_max():
    """The prior times widths 1..PRIOR_K_MAX + 1; cheap, always accepted drafts still take k
    to K_MAX, its wider verifies costed along the line the timed ones extend."""
    from specchat.engine.costs import PRIOR_WIDTHS
    from specchat.engine.params import K_MAX

    step = 0.010
    prior = Costs.of({n: step * (1 + 0.05 * (n - 1)) for n in PRIOR_WIDTHS}, draft_step_s=0.0002)
    policy = AdaptiveK(prior=prior)
    assert policy.k_max == K_MAX
    for _ in range(40):
        k = policy()
        policy.observe(make_round(k, k, 0.0002 * k, step * (1 + 0.05 * k), k))
    assert policy() == K_MAX


def test_a_prior_whose_verify_grows_fast_keeps_k_auto_where_the_extended_line_says():
    """A verify of n tokens costing 0.6·n steps beyond the timed widths (the extension) makes
    long drafts lose even at high acceptance: k = auto stays well below K_MAX."""
    from specchat.engine.costs import PRIOR_WIDTHS
    from specchat.engine.params import K_MAX

    step = 0.010
    steep = Costs.of({n: step * max(1.0, 0.6 * n) for n in PRIOR_WIDTHS}, draft_step_s=0.0002)
    assert steep.verify_seconds(K_MAX + 1) == pytest.approx(step * 0.6 * (K_MAX + 1))
    policy = AdaptiveK(prior=steep)
    policy.acceptance = AcceptanceEstimate(accepted=9.0, rejections=1.0)  # α = 0.9
    assert 1 <= policy() < PRIOR_WIDTHS[-1]


def test_verify_costs_beyond_the_timed_widths_extend_the_line_through_the_widest():
    from specchat.engine.costs import extended

    flat_then_rising = {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.5, 6: 2.0, 7: 2.5, 8: 3.0}
    assert extended(flat_then_rising, 12) == pytest.approx(5.0)  # the slope where it ends
    assert extended({1: 1.0, 2: 1.2, 3: 1.1}, 9) >= 1.1  # never below the widest timed
    assert extended({1: 1.0}, 9) == 1.0
    assert extended({1: 1.0, 4: 2.0}, 3) == 2.0  # in a gap: the next wider timed width


from toy import ScriptedModel  # noqa: E402


def test_a_prior_whose_extension_barely_pays_at_k_max_still_starts_plain_and_never_probes():
    """This CPU's Qwen pair, timed (2026-11-25): v(2..9) = 1.85 ... 5.46 with llama.cpp's
    steps, c = 0.55. No timed width pays even at full acceptance; the line through the widest
    four, extended to a 17-token verify, makes k = 16 look 1% cheaper than 17 plain steps.
    That guess must not set probes going (each feeds the draft the whole context first)."""
    step = 0.034
    v = [1, 1.85, 2.52, 3.01, 3.81, 4.39, 5.11, 5.11, 5.46]
    prior = Costs.of({n: step * x for n, x in enumerate(v, start=1)}, draft_step_s=0.55 * step)
    assert 17 * step > 16 * prior.draft_step_s + prior.verify_seconds(17)  # the guess pays
    policy = AdaptiveK(prior=prior)
    ks = []
    for _ in range(500):
        k = policy()
        ks.append(k)
        policy.observe(make_round(k, k, prior.draft_step_s * k, prior.verify_seconds(k + 1), k))
    assert ks == [0] * 500 and not policy.can_pay()


def lookup_round(drafted: int, accepted: int, verify_s: float, k: int) -> Round:
    """A round whose drafts prompt lookup copied inside a lookup-first drafter (free)."""
    event = make_round(drafted, accepted, 0.00001, verify_s, k)
    return Round(event.accepted, event.rejected, event.token, event.token_kind, event.draft_s,
                 event.verify_s, k, event.fed, by_lookup=True)


def test_copied_text_and_the_models_guesses_are_sized_apart():
    """Lookup rounds accepted in full and model rounds mostly rejected (a draft costing half
    a step): lookup proposals grow long, the model's stay short, and neither moves the
    other's α or the model's draft cost."""
    policy = AdaptiveK(k_max=16)
    for _ in range(40):
        for _ in range(2):  # a draft step is learned from a model round after a model round
            k = policy()
            policy.observe(make_round(k, min(k, 1), 0.005 * k, 0.010 + 0.0005 * k, k))
        copy = policy.lookup_length()
        policy.observe(lookup_round(copy, copy, 0.010 + 0.0005 * copy, copy))
    assert policy.lookup_length() >= 12 and policy() <= 4
    assert policy.acceptance.alpha < 0.6 < 0.95 < policy.lookup_acceptance.alpha
    assert policy.costs.draft_cost() == pytest.approx(0.005, rel=0.01)


def test_the_decoder_asks_a_lookup_first_drafter_which_will_draft_before_choosing_k():
    """On a prompt that repeats, k = "auto" gives lookup rounds their own length, and
    the rounds say which drafter drafted them; the answer stays the target's greedy one."""
    from specchat.engine import LookupFirstDrafter, ModelDrafter, Settings
    from toy import TableModel, plain_greedy

    asked: list[bool] = []
    policy = AdaptiveK(k_max=8)
    settings = Settings(policy.k_start, SamplingParams(), policy)
    drafter = LookupFirstDrafter(ModelDrafter(TableModel(seed=1)),
                                 NgramDrafter(max_ngram=2, min_ngram=1, window=False))
    original = drafter.will_look_up

    def recording(committed):
        asked.append(original(committed))
        return asked[-1]

    drafter.will_look_up = recording
    prompt = [2, 2, 2, 2, 2, 2]
    rounds = [e for e in Decoder(TableModel(seed=0), drafter, set()).generate(prompt, settings, 60)
              if isinstance(e, Round)]
    assert [t for r in rounds for t in r.committed] == plain_greedy(TableModel(seed=0), prompt, 60)
    assert len(asked) == len(rounds) and True in asked
    assert [r.by_lookup for r in rounds if r.drafted] == [a for a, r in zip(asked, rounds)
                                                          if r.drafted]
    assert policy.lookup_acceptance.accepted != AcceptanceEstimate().accepted
