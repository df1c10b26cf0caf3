"""The panel says what a run is: a speedup only for speculative answers, against a
baseline for the answer's own sampling settings; a race shows the gauge's estimate
beside its own ratio; the float32 replay reports its verdict."""

from __future__ import annotations

from tui_support import StepClock, ask, last_answer, make_app, pick_pair, ready, wait_for

from specchat.chat.scripted import FakeConfig
from specchat.tui.transcript import Notice

SIZE = (150, 45)


def shown(app, widget: str) -> str:
    return str(app.gauges.query_one(widget).render())


async def test_a_target_only_answer_shows_no_speedup_and_says_speculation_is_off():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+s")
        await ask(pilot)
        assert "speculation off" in shown(app, "#g-speedup")
        assert "×" not in shown(app, "#g-speedup")
        assert app.gauges.query_one("#g-speedup-big").value == "-"


async def test_a_race_shows_no_speedup_while_it_replays_and_reports_the_gauge_beside_its_ratio():
    """Worked by hand, on a clock that reads 0.00, 0.01, ... once as an answer starts and once
    per round recorded and per snapshot. The answer's 18 word tokens at k = 4 come in rounds of
    5, 3, 1, 4 and 5 (ACCEPT_PATTERN 4, 2, 0, 3, 4: a full accept adds the bonus): the first
    ends at 0.01, the final snapshot reads 0.11, so 13 decode tokens in 0.10 s = 130.0 tok/s,
    against the scripted baseline's 20 tok/s at load ×1.00: the gauge says 6.50×. The
    race's target-only answer (18 rounds of one token) starts at 0.12, ends its first round
    at 0.13 and its last snapshot reads 0.49: 17 tokens in 0.36 s = 47.2 tok/s, and
    130.0 / 47.2 = 2.75×."""
    config = FakeConfig(name="fake", answer=" ".join(["one two three four five six"] * 3),
                        tokens_per_s=12, clock=StepClock())
    app = make_app({"fake": config})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot)
        committed = [s for s in last_answer(app).tokens.spans if s.kind != "rejected"]
        await wait_for(pilot, lambda: app.gauges.stats.tokens == len(committed) == 18)
        assert f"{app.gauges.speedup():.2f}" == "6.50"
        await pilot.press("f5")
        await wait_for(pilot, lambda: app.query(Notice))
        # the panel shows the race's own figures, and no speedup for them
        assert "race: target only" in shown(app, "#g-speedup")
        assert app.gauges.query_one("#g-speedup-big").value == "-"
        notice = str(app.query(Notice).last().render())
        assert ("race: speculative 130.0 tok/s vs target-only 47.2 tok/s → 2.75× (the gauge "
                "estimated 6.50× at load ×1.00 of idle; the race ran at ×1.00)") in notice
        assert "identical ✓" in notice


async def test_a_new_temperature_gets_its_own_target_only_measurement():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        service = app.services["fake"]
        first = app.gauges.baseline
        assert first.sampling.temperature == 0.0
        await pilot.press("f12")
        await wait_for(pilot, lambda: app.gauges.baseline is not None
                       and app.gauges.baseline.sampling.temperature == 0.1)
        assert service.baselines_started == 2
        await ask(pilot)
        assert "T=0.1" in shown(app, "#g-speedup")


async def test_an_idle_chat_refines_its_baseline_until_settled_and_then_stops_measuring():
    config = FakeConfig(name="fake", baseline_passes=3)
    app = make_app({"fake": config})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: app.gauges.baseline.passes == 3)
        service = app.services["fake"]
        assert service.baselines_started == 3
        await wait_for(pilot, lambda: "(3 passes)" in app.gauges.status)
        await ask(pilot)
        assert "3 passes" in shown(app, "#g-speedup")
        await pilot.pause(0.2)
        assert service.baselines_started == 3  # settled: an idle chat measures no more


async def test_the_float32_replay_reports_its_verdict_in_the_transcript():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot)
        await pilot.press("ctrl+b")
        await wait_for(pilot, lambda: app.query(Notice))
        assert "float32 replay" in str(app.query(Notice).last().render())


async def test_after_a_pair_switch_the_panel_shows_no_figures_of_the_old_pairs_answer():
    configs = {"old": FakeConfig(name="old", tokens_per_s=40, answer="one two three four " * 4),
               "new": FakeConfig(name="new", load_s=0.2, answer="fresh")}
    app = make_app(configs, first="old")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot)
        await pilot.press("f5")  # a race: its figures and "target only" stay on the panel
        await wait_for(pilot, lambda: app.query(Notice))
        assert "tokens 0" not in shown(app, "#g-timing")
        await pick_pair(pilot, "new")
        await wait_for(pilot, lambda: app.sub_title == "new")
        await pilot.pause()
        assert "tokens 0" in shown(app, "#g-timing") and "rounds 0" in shown(app, "#g-timing")
        assert app.gauges.query_one("#g-tps").value == "-"
        assert "race" not in shown(app, "#g-speedup")
        assert "acceptance – (0/0)" in shown(app, "#g-acceptance")


async def test_with_no_pair_loaded_the_panel_promises_no_measurement():
    configs = {"broken": FakeConfig(name="broken", load_error="no such model file"),
               "fake": FakeConfig(name="fake")}
    app = make_app(configs, first="broken")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "load failed" in app.gauges.status)
        await pilot.pause()
        assert shown(app, "#g-speedup") == "speedup: – (no pair loaded)"
        await pick_pair(pilot, "fake")
        await ready(pilot)
        await pilot.pause()
        assert "no pair loaded" not in shown(app, "#g-speedup")
