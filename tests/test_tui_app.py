"""Pilot tests of the chat app against scripted services: colours, ghosts, gauges,
stopping, errors, quitting, switching pairs, step mode and the trial features. They
drive the app through keys and read what it shows and what it saved."""

from __future__ import annotations

import time

from tui_support import (ROUNDS, answers, ask, drawn, last_answer, make_app, pick_pair,
                          ready, saved_conversation, streaming, wait_for)

from specchat.history.store import HistoryStore
from specchat.chat.scripted import FakeConfig
from specchat.tui.transcript import AnswerView, Notice, TokenFlow

SIZE = (150, 45)


def colour(app, kind: str) -> str:
    return app.theme_variables[f"spec-{kind}"].lower()


async def run_palette(pilot, title: str) -> None:
    """Ctrl+P, type the command's title, Enter."""
    await pilot.press("ctrl+p")
    await pilot.pause(0.2)
    await pilot.press(*title)
    await pilot.pause(0.3)
    await pilot.press("enter")
    await pilot.pause()


async def test_each_token_is_drawn_in_its_kinds_theme_colour():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot)
        runs = drawn(last_answer(app).tokens)
        by_text = {text: (hex_, strike) for text, hex_, strike in runs}
        assert by_text["Hello"] == (colour(app, "accepted"), False)
        assert by_text[" ghost"] == (colour(app, "rejected"), True)
        assert by_text[" world"] == (colour(app, "resampled"), False)
        assert by_text[" c"] == (colour(app, "bonus"), False)


async def test_ghost_key_hides_rejected_drafts_and_copy_never_includes_them():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot)
        assert " ghost" in last_answer(app).tokens.drawn_text()
        await pilot.press("ctrl+g")
        await pilot.pause()
        assert " ghost" not in last_answer(app).tokens.drawn_text()
        await pilot.press("ctrl+o")
        assert app.clipboard == "Hello world a b c done."
        await pilot.press("ctrl+g")
        await pilot.pause()
        assert " nope never" in last_answer(app).tokens.drawn_text()


async def test_gauges_show_the_scripted_statistics():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot)
        await wait_for(pilot, lambda: app.gauges.stats is not None and app.gauges.stats.rounds == 3)
        text = lambda wid: str(app.gauges.query_one(wid).render())
        assert "acceptance 50.0% (3/6)" in text("#g-acceptance")
        assert "τ 2.00" in text("#g-acceptance")
        assert "pos 1" in text("#g-positions") and "0.67" in text("#g-positions")
        assert "0.33" in text("#g-positions")
        # Worked by hand: the StepClock reads 0.00, 0.01, 0.02, ... once when the answer starts,
        # then once per round recorded and once per snapshot; the first round ends at 0.01 with
        # 2 tokens ("Hello", " world"), the final snapshot reads 0.07. So 4 decode tokens
        # (" a b c done.") in 0.06 s = 66.7 tokens/s, against the scripted baseline's
        # 20 tokens/s at every context length and load ×1.00: 3.33×.
        stats = app.gauges.stats
        assert (stats.decode_tokens, round(stats.decode_s, 9)) == (4, 0.06)
        assert "speedup: 3.33× (" in text("#g-speedup")
        assert "target-only at the same context lengths" in text("#g-speedup")
        assert "α 0.60" in text("#g-theory") and "ideal" in text("#g-theory")
        assert "k 2" in text("#g-controls")
        assert "cpu · float32" in text("#g-pair")


async def test_escape_stops_the_answer_and_keeps_the_partial_text_marked_stopped():
    config = FakeConfig(name="fake", tokens_per_s=40, answer="word " * 400)
    app = make_app({"fake": config})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press(*"go", "enter")
        await wait_for(pilot, lambda: streaming(app) and len(last_answer(app).text) > 20)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not streaming(app), timeout=2)
        view = last_answer(app)
        assert 0 < len(view.text) < len(config.answer)
        assert "stopped" in str(view.status.render())
        assert app.services["fake"].turns()[-1] == ("assistant", view.text)
        saved = saved_conversation()
        assert saved.turns[-1].status == "stopped" and saved.turns[-1].text == view.text


async def test_a_failure_during_generation_notifies_and_the_next_message_works():
    config = FakeConfig(name="fake", k=2, rounds=ROUNDS, fail_at_round=1)
    app = make_app({"fake": config})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press(*"first", "enter")
        await wait_for(pilot, lambda: any("generation failed" in n.message for n in app._notifications))
        assert not streaming(app)
        failed = last_answer(app)
        assert "failed" in str(failed.status.render()) and failed.text == "Hello world"
        assert "scripted failure at round 1" in str(failed.status.render())
        assert app.services["fake"].turns() == []
        config.fail_at_round = None
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: not streaming(app) and app.services["fake"].turns())
        assert app.services["fake"].turns()[0] == ("user", "first")
        assert [v.text for v in app.query(AnswerView)] == ["Hello world a b c done."]
        await pilot.press(*"second", "enter")
        await wait_for(pilot, lambda: not streaming(app) and len(app.services["fake"].turns()) == 4)


async def test_a_pair_that_fails_to_load_leaves_the_app_usable():
    configs = {"broken": FakeConfig(name="broken", load_error="no such model file"),
               "fake": FakeConfig(name="fake", k=2, rounds=ROUNDS)}
    app = make_app(configs, first="broken")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: any("cannot load" in n.message for n in app._notifications))
        await pilot.press(*"still typing")
        assert app.screen.query_one("#input").text == "still typing"
        await pick_pair(pilot, "fake")
        await ready(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: answers(app) and not streaming(app))
        assert last_answer(app).text == "Hello world a b c done."


async def test_quitting_during_generation_exits_within_a_second():
    config = FakeConfig(name="fake", tokens_per_s=30, answer="word " * 1000)
    app = make_app({"fake": config})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press(*"go", "enter")
        await wait_for(pilot, lambda: streaming(app) and last_answer(app).text)
        started = time.perf_counter()
        await pilot.press("ctrl+q")
    assert time.perf_counter() - started < 1.0
    service = app.services["fake"]
    assert service.busy.acquire(timeout=1.0), "the worker thread kept decoding after quit"


async def test_switching_pair_keeps_the_old_one_answering_until_the_new_one_loads():
    configs = {"old": FakeConfig(name="old", tokens_per_s=100, answer="old " * 300),
               "new": FakeConfig(name="new", load_s=0.3, answer="new answer")}
    app = make_app(configs, first="old")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press(*"q1", "enter")
        await wait_for(pilot, lambda: streaming(app))
        await pick_pair(pilot, "new")
        await wait_for(pilot, lambda: "switching after this answer" in app.gauges.status
                       or app.sub_title == "new")
        assert app.sub_title == "old" or not streaming(app)
        await wait_for(pilot, lambda: not streaming(app) and app.sub_title == "new")
        assert last_answer(app).text.startswith("old")
        assert app.services["new"].turns()[0] == ("user", "q1")
        await pilot.press(*"q2", "enter")
        await wait_for(pilot, lambda: not streaming(app) and last_answer(app).text == "new answer")


async def test_step_mode_holds_each_round_with_its_drafts_pending_until_the_key():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("f7", *"hi", "enter")
        await wait_for(pilot, lambda: streaming(app) and last_answer(app).tokens.pending)
        tokens: TokenFlow = last_answer(app).tokens
        assert [s.text for s in tokens.pending] == ["Hello", " ghost"]
        assert tokens.spans == []
        pending = drawn(tokens)
        assert all(hex_ == colour(app, "pending") for _, hex_, _ in pending)
        await pilot.press("f8")
        await wait_for(pilot, lambda: [s.text for s in tokens.pending] == [" a", " b"])
        assert [(s.text, s.kind) for s in tokens.spans] == [
            ("Hello", "accepted"), (" ghost", "rejected"), (" world", "resampled")]
        await pilot.press("f8")
        await wait_for(pilot, lambda: [s.text for s in tokens.pending] == [" nope", " never"])
        await pilot.press("f8")
        await wait_for(pilot, lambda: not streaming(app))
        assert last_answer(app).text == "Hello world a b c done."


async def test_markdown_toggle_switches_a_finished_answer_between_views():
    app = make_app({"fake": FakeConfig(name="fake")})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot)
        view: AnswerView = last_answer(app)
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert view.markdown_shown and not view.tokens.display
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert view.tokens.display


async def test_regenerate_asks_the_same_message_again_and_replaces_the_answer():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "again")
        first = last_answer(app)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: last_answer(app) is not first and not streaming(app))
        assert len(app.query(AnswerView)) == 1
        assert app.services["fake"].turns() == [("user", "again"),
                                                ("assistant", "Hello world a b c done.")]


async def test_race_replays_target_only_and_reports_both_speeds_and_identity():
    app = make_app({"fake": FakeConfig(name="fake", answer="one two three four five six")})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot)
        await pilot.press("f5")
        await wait_for(pilot, lambda: app.query(Notice))
        notice = str(app.query(Notice).last().render())
        assert "speculative" in notice and "target-only" in notice and "identical ✓" in notice
        race_views = [v for v in app.query(AnswerView) if "race" in v.label]
        assert {s.kind for s in race_views[0].tokens.spans} == {"target"}


async def test_k_and_temperature_keys_apply_to_the_backend():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("f10", "f12", "f12")
        service = app.services["fake"]
        assert service.k == 3 and abs(service.temperature - 0.2) < 1e-9
        assert "k 3" in str(app.gauges.query_one("#g-controls").render())


async def test_speculation_toggle_makes_the_next_answer_target_only():
    app = make_app({"fake": FakeConfig(name="fake", answer="a b c d e f")})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+s")
        await ask(pilot)
        assert {s.kind for s in last_answer(app).tokens.spans} == {"target"}
        assert "target only" in last_answer(app).label


async def test_an_answer_under_k_auto_is_labelled_auto_not_its_starting_k():
    app = make_app({"fake": FakeConfig(name="fake", k=4, k_auto=True)})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot)
        assert "speculative k=auto" in last_answer(app).label
        assert "k=4" not in last_answer(app).label
        assert saved_conversation().turns[-1].mode == "speculative k=auto"


async def test_a_trimmed_context_shows_a_visible_notice():
    app = make_app({"fake": FakeConfig(name="fake", trim_every_answer=True)})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot)
        assert any("oldest exchange" in str(n.render()) for n in app.query(Notice))


async def test_the_app_takes_typing_while_the_pair_is_still_loading():
    app = make_app({"fake": FakeConfig(name="fake", load_s=3.0)})
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.1)
        await pilot.press(*"early bird")
        assert "loading" in app.gauges.status and app.gauges.info is None
        assert app.screen.query_one("#input").text == "early bird"
        await pilot.press("enter")
        await wait_for(pilot, lambda: answers(app) and not streaming(app), timeout=10)
        assert app.services["fake"].turns()[0] == ("user", "early bird")


async def test_reopened_history_shows_answers_with_their_colours():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "remember me")
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert not app.query(AnswerView)
        await pilot.press("f4")
        await wait_for(pilot, lambda: app.screen.query("#history-list"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.query(AnswerView))
        await pilot.pause()
        view = app.query(AnswerView).first()
        kinds = [(s.text, s.kind) for s in view.tokens.spans]
        assert ("Hello", "accepted") in kinds and (" ghost", "rejected") in kinds
        runs = {t: h for t, h, _ in drawn(view.tokens)}
        assert runs[" c"] == colour(app, "bonus")
        assert app.services["fake"].turns()[0] == ("user", "remember me")


async def test_the_chosen_theme_is_remembered_for_the_next_start():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await run_palette(pilot, "Theme: specchat-light")
    again = make_app()
    async with again.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert again.theme == "specchat-light"
        assert again.theme_variables["spec-accepted"].lower() == "#1a7f37"


async def test_tokens_on_screen_are_always_already_in_the_history_database():
    app = make_app({"fake": FakeConfig(name="fake", tokens_per_s=300, answer="word " * 3000)})
    samples: list[tuple[int, int]] = []
    store = HistoryStore()

    def sample() -> None:  # what the answer holds (drawn at the next frame) against the database
        if streaming(app):
            rows = store.db.execute("SELECT COUNT(*) FROM tokens WHERE turn_id = "
                                    "(SELECT MAX(id) FROM turns WHERE role = 'assistant')")
            samples.append((len(last_answer(app).tokens.spans), rows.fetchone()[0]))

    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.set_interval(0.01, sample)
        await pilot.press(*"save me", "enter")
        await wait_for(pilot, lambda: streaming(app) and len(last_answer(app).tokens.spans) > 60)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not streaming(app))
    store.close()
    streamed = [s for s in samples if s[0] > 0]
    assert len(streamed) >= 3
    assert all(rows >= shown for shown, rows in streamed), streamed


async def test_a_question_interrupts_the_baseline_measurement_which_runs_again_afterwards():
    config = FakeConfig(name="fake", k=2, rounds=ROUNDS, baseline_s=3.0)
    app = make_app({"fake": config})
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.gauges.status.startswith("ready · measuring target-only"))
        started = time.perf_counter()
        await pilot.press(*"now", "enter")
        await wait_for(pilot, lambda: answers(app) and not streaming(app))
        assert time.perf_counter() - started < 2.0, "the answer waited for the baseline"
        await wait_for(pilot, lambda: app.gauges.baseline is not None, timeout=10)
        assert app.services["fake"].baselines_started == 2


async def test_a_flood_of_stats_messages_collapses_to_far_fewer_gauge_redraws():
    from specchat.tui.gauges import Gauges

    app = make_app({"fake": FakeConfig(name="fake", answer="w " * 3000)})
    redraws = []
    original = Gauges.watch_stats

    def counting(self, stats):
        redraws.append(stats)
        original(self, stats)

    Gauges.watch_stats = counting
    try:
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            await ask(pilot, "fast")
            rounds = app.gauges.stats.rounds
    finally:
        Gauges.watch_stats = original
    assert rounds > 500
    assert len(redraws) < rounds / 2, (len(redraws), rounds)
    assert redraws[-1].rounds == rounds  # the latest figures always arrive


def test_a_scripted_answer_gets_its_figures_from_the_engines_statistics():
    """The scripted pair plays engine rounds through the chat layer's metrics: acceptance,
    τ, α and per-position acceptance are the engine's (ROUNDS: k = 2; drafts 2 kept of 3 at
    position 1, 1 of 3 at position 2; α counts only the drafts put to the test)."""
    from specchat.chat.scripted import ScriptedService

    service = ScriptedService(FakeConfig(k=2, rounds=ROUNDS))
    done = list(service.answer("hi", True, lambda: False))[-1]
    stats = done.stats
    assert (stats.accepted, stats.drafted, stats.rounds, stats.tokens) == (3, 6, 3, 6)
    assert stats.mean_acceptance_length == 2.0
    assert [round(p, 3) for p in stats.per_position_acceptance] == [0.667, 0.333]
    assert stats.alpha == 3 / 5  # tested: 2 + 2 + 1 drafts (round 3's second never was)
    assert stats.histogram == (1, 1, 1) and stats.k_in_use == 2


async def test_esc_while_the_model_is_still_busy_ends_the_answer_and_the_next_message_is_answered():
    """A question asked while something else holds the model (a baseline measurement that has not
    let go yet) waits for it; Esc then must end that answer as stopped, not leave the chat
    "answering…" with no worker behind it and every later message refused."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        service = app.services["fake"]
        assert service.busy.acquire(timeout=1.0)  # the model is busy elsewhere
        await pilot.press(*"q1", "enter")
        await wait_for(pilot, lambda: streaming(app))
        await pilot.pause(0.2)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not streaming(app), timeout=3.0)
        assert "stopped" in str(last_answer(app).status.render())
        service.busy.release()
        await ask(pilot, "q2")
        assert last_answer(app).text == "Hello world a b c done."
        assert [text for role, text in service.turns() if role == "user"] == ["q2"]


async def test_esc_withdraws_a_message_sent_while_the_pair_loads_so_it_is_never_answered():
    app = make_app({"fake": FakeConfig(name="fake", load_s=1.5)})
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.1)
        await pilot.press(*"never mind", "enter")
        await pilot.pause(0.1)
        await pilot.press("escape")
        await wait_for(pilot, lambda: any("will not be answered" in str(n.render()) for n in app.query(Notice)))
        await ready(pilot)
        await pilot.pause(0.3)
        assert not answers(app) and app.services["fake"].turns() == []
        await ask(pilot, "hi")
        assert app.services["fake"].turns()[0] == ("user", "hi")


async def test_while_the_model_reads_a_long_prompt_the_status_says_so_and_esc_still_stops_it():
    """A 3,000-token prompt keeps a CPU busy for a minute before the first token: the screen
    says what the model is doing rather than a bare "answering…", and Esc ends it."""
    app = make_app({"fake": FakeConfig(name="fake", prompt_tokens=3000, reading_s=30.0)})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press(*"long", "enter")
        await wait_for(pilot, lambda: "reading the prompt (3,000 tokens)" in app.gauges.status)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not streaming(app), timeout=2.0)
        assert "stopped" in str(last_answer(app).status.render())
        assert "reading" not in app.gauges.status


async def test_the_reading_status_counts_only_the_tokens_the_caches_lack():
    """A long conversation's next question: the caches keep what they read before, so the
    status counts the new tokens and says how many were kept."""
    app = make_app({"fake": FakeConfig(name="fake", prompt_tokens=3400, kept_tokens=3000,
                                       reading_s=30.0)})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press(*"long", "enter")
        await wait_for(pilot, lambda: "reading the prompt (400 tokens, 3,000 kept from before)"
                       in app.gauges.status)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not streaming(app), timeout=2.0)


async def test_the_reading_status_gives_way_to_the_answer_once_tokens_come():
    app = make_app({"fake": FakeConfig(name="fake", prompt_tokens=3000, reading_s=0.3,
                                       tokens_per_s=20, answer="word " * 60)})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press(*"long", "enter")
        await wait_for(pilot, lambda: "reading the prompt" in app.gauges.status)
        await wait_for(pilot, lambda: streaming(app) and last_answer(app).text)
        assert app.gauges.status == "answering…"
