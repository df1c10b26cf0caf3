"""A pair that fails to load in the chat (issue 40, part 4): the reason stays on screen until
the user picks another pair (it was a toast gone after 12 s); a message sent while no pair
answers is refused in the input with the reason and what to do (it was taken, never
answered, and saved as a conversation with no answer); one sent while the pair was still
loading is answered with the reason, as a failed answer that regenerate asks again once a
pair works. And an answer the model's context cut short says so, not "done". Keys and
messages through the app, over scripted pairs and over a real empty model folder."""

from __future__ import annotations

from tui_support import (ROUNDS, StepClock, answers, ask, last_answer, make_app, pick_pair, ready,
                         saved_conversation, streaming, wait_for)

from specchat.chat.scripted import FakeConfig
from specchat.history.store import HistoryStore
from specchat.tui.transcript import UserTurn

SIZE = (120, 40)
FAILURE = "cannot load pair 'broken': RuntimeError: no such model file (pick another pair with F3)"


def configs(load_s: float = 0.0) -> dict[str, FakeConfig]:
    return {"broken": FakeConfig(name="broken", load_error="no such model file", load_s=load_s),
            "fake": FakeConfig(name="fake", k=2, rounds=ROUNDS, clock=StepClock())}


def problem_lines(app) -> str:
    bar = app.chat_screen.problems
    return str(bar.render()) if bar.display else ""


def saved_conversations() -> int:
    store = HistoryStore()
    try:
        return len(store.list_conversations())
    finally:
        store.close()


async def test_a_failed_load_stays_on_screen_until_another_pair_is_picked():
    app = make_app(configs(), first="broken")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "load failed" in app.gauges.status)
        app.clear_notifications()  # the toast fades; the reason stays
        await pilot.pause()
        assert problem_lines(app) == f"⚠ {FAILURE}"
        await pick_pair(pilot, "fake")
        await pilot.pause()
        assert problem_lines(app) == ""
        await ready(pilot)


async def test_a_message_sent_after_a_failed_load_is_refused_in_the_input_with_the_reason():
    app = make_app(configs(), first="broken")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "load failed" in app.gauges.status)
        app.clear_notifications()
        await pilot.press(*"hello", "enter")
        await pilot.pause()
        assert app.screen.query_one("#input").text == "hello"
        assert [n.message for n in app._notifications] == [f"not sent: {FAILURE}"]
        assert not app.query(UserTurn) and not answers(app)
        await pick_pair(pilot, "fake")
        await ready(pilot)
        await pilot.press("enter")  # the same text, now with a pair that answers
        await wait_for(pilot, lambda: answers(app) and not streaming(app))
        assert last_answer(app).text == "Hello world a b c done."
    assert saved_conversations() == 1
    assert [t.role for t in saved_conversation().turns] == ["user", "assistant"]


async def test_a_message_queued_while_the_pair_loads_is_answered_with_the_reason_if_it_fails():
    app = make_app(configs(load_s=0.5), first="broken")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"hello", "enter")
        await wait_for(pilot, lambda: answers(app) and last_answer(app).finished)
        await pilot.pause()
        status = str(last_answer(app).status.render())
        assert status == f"✗ failed · {FAILURE}"
        saved = saved_conversation()
        assert [(t.role, t.status) for t in saved.turns] == [("user", "done"), ("assistant", "error")]
        await pick_pair(pilot, "fake")
        await ready(pilot)
        await pilot.press("ctrl+r")  # regenerate asks it again, of the pair that loaded
        await wait_for(pilot, lambda: not streaming(app)
                       and last_answer(app).text == "Hello world a b c done.")
        assert len(answers(app)) == 1


async def test_an_empty_model_folder_is_refused_with_what_to_do(tmp_path):
    from test_tui_real_pair import real_app

    empty = tmp_path / "empty"
    empty.mkdir()
    config = tmp_path / "models.toml"
    config.write_text(f'[pairs.empty]\ntarget = "{empty}"\nk = 0\n')
    app = real_app(config, "empty", max_new_tokens=8)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "load failed" in app.gauges.status, timeout=60)
        reason = (f"cannot load pair 'empty': model folder {empty} has no config.json: point "
                  "models.toml at a folder saved with save_pretrained (pick another pair with F3)")
        assert problem_lines(app) == f"⚠ {reason}"
        await pilot.press(*"hi", "enter")
        await pilot.pause()
        assert app.screen.query_one("#input").text == "hi" and not app.query(UserTurn)
    assert saved_conversations() == 0


async def test_an_answer_the_context_cut_short_says_so():
    full = FakeConfig(name="fake", k=2, rounds=ROUNDS, clock=StepClock(), stop_reason="context_full")
    app = make_app({"fake": full})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "hi")
        assert "⚠ context full: the model has no room for more" in str(last_answer(app).status.render())
    assert saved_conversation().turns[-1].status == "context_full"
