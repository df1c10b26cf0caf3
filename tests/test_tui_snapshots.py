"""Snapshots (pytest-textual-snapshot; update with `pytest --snapshot-update` and look at
the SVGs before committing them): the chat after one scripted answer, once per built-in
theme; the help, pair picker and history screens; presentation mode; step mode with a
round's drafts pending."""

from __future__ import annotations

import time

import pytest
from tui_support import StepClock, ROUNDS, ask, last_answer, make_app, ready, streaming, wait_for

from specchat.chat.scripted import FakeConfig
from specchat.history.store import HistoryStore

THEMES = ["specchat-dark", "specchat-light", "specchat-high-contrast", "specchat-colorblind"]
MEASURED_AT = 1_790_000_000.0


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("theme", THEMES)
def test_chat_after_one_answer_looks_the_same(theme, snap_compare, utc):
    config = FakeConfig(name="scripted", k=2, rounds=ROUNDS * 3, clock=StepClock(),
                        baseline_measured_at=MEASURED_AT)
    app = make_app({"scripted": config}, first="scripted", theme=theme)

    async def answer_once(pilot):
        await ready(pilot)
        await ask(pilot, "Explain speculative decoding")
        gauges = app.gauges
        await wait_for(pilot, lambda: gauges.stats.rounds == 9)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(130, 40), run_before=answer_once)


def scripted_app():
    config = FakeConfig(name="scripted", k=2, rounds=ROUNDS * 3, clock=StepClock(),
                        baseline_measured_at=MEASURED_AT)
    other = FakeConfig(name="scripted-2", k=3, rounds=ROUNDS, clock=StepClock(),
                       baseline_measured_at=MEASURED_AT)
    return make_app({"scripted": config, "scripted-2": other}, first="scripted")


def saved_conversations() -> None:
    """Two conversations in the history file, at fixed times (the list shows them)."""
    store = HistoryStore()
    for n, (title, pair) in enumerate([("Sea poem", "scripted"), ("Rename a variable", "scripted-2")]):
        conversation = store.new_conversation(title, pair)
        store.add_user_turn(conversation, title)
        store.db.execute("UPDATE conversations SET created = ?, updated = ? WHERE id = ?",
                         (MEASURED_AT + 3600 * n, MEASURED_AT + 3600 * n, conversation))
        store.db.commit()
    store.close()


async def answered(pilot, *prompts: str) -> None:
    """The pair is ready and has answered each prompt in turn."""
    await ready(pilot)
    for prompt in prompts:
        await ask(pilot, prompt)


async def open_screen(pilot, key: str, widget: str) -> None:
    await ready(pilot)
    await pilot.press(key)
    await wait_for(pilot, lambda: pilot.app.screen.query(widget))
    await pilot.pause(0.2)


def test_the_help_screen_looks_the_same(snap_compare, utc):
    async def press_f1(pilot):
        await open_screen(pilot, "f1", "Markdown")

    assert snap_compare(scripted_app(), terminal_size=(130, 48), run_before=press_f1)


def test_the_pair_picker_looks_the_same(snap_compare, utc):
    async def press_f3(pilot):
        await open_screen(pilot, "f3", "#pair-list")

    assert snap_compare(scripted_app(), terminal_size=(130, 40), run_before=press_f3)


def test_the_history_screen_looks_the_same(snap_compare, utc):
    saved_conversations()

    async def press_f4(pilot):
        await open_screen(pilot, "f4", "#history-list")

    assert snap_compare(scripted_app(), terminal_size=(130, 40), run_before=press_f4)


def test_presentation_mode_after_one_answer_looks_the_same(snap_compare, utc):
    app = scripted_app()

    async def present(pilot):
        await answered(pilot, "Explain speculative decoding")
        await wait_for(pilot, lambda: app.gauges.stats.rounds == 9)
        await pilot.press("f6")
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(130, 40), run_before=present)


def test_step_mode_with_a_round_pending_looks_the_same(snap_compare, utc):
    app = scripted_app()

    async def step_once(pilot):
        await ready(pilot)
        await pilot.press("f7")
        await pilot.press(*"Explain speculative decoding")
        await pilot.press("enter")
        await wait_for(pilot, lambda: streaming(app) and last_answer(app).tokens.pending)
        await pilot.press("f8")
        await wait_for(pilot, lambda: [s.text for s in last_answer(app).tokens.pending] == [" a", " b"])
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(130, 40), run_before=step_once)


def test_the_charts_after_two_answers_look_the_same(snap_compare, utc):
    app = scripted_app()

    assert snap_compare(app, terminal_size=(130, 44), run_before=charted)


async def charted(pilot) -> None:
    """Two answers, the second without speculation (no acceptance rate), then Ctrl+D."""
    await answered(pilot, "Explain speculative decoding")
    await pilot.press("ctrl+s")
    await ask(pilot, "And again")
    pilot.app.clear_notifications()
    await pilot.press("ctrl+d")
    await wait_for(pilot, lambda: pilot.app.screen.query("#charts-scroll"))
    await pilot.pause(0.3)


def test_the_charts_at_80x24_show_one_legible_row_and_scroll(snap_compare, utc):
    assert snap_compare(scripted_app(), terminal_size=(80, 24), run_before=charted)
