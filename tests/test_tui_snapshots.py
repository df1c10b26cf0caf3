"""Snapshot of the chat after one scripted answer, once per built-in theme
(pytest-textual-snapshot; update with `pytest --snapshot-update`)."""

from __future__ import annotations

import time

import pytest
from tui_support import StepClock, ROUNDS, ask, make_app, ready, wait_for

from specchat.chat.scripted import FakeConfig

THEMES = ["specchat-dark", "specchat-light", "specchat-high-contrast", "specchat-colorblind"]
CALIBRATED_AT = 1_790_000_000.0


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
                        calibrated_at=CALIBRATED_AT)
    app = make_app({"scripted": config}, first="scripted", theme=theme)

    async def answer_once(pilot):
        await ready(pilot)
        await ask(pilot, "Explain speculative decoding")
        gauges = app.gauges
        await wait_for(pilot, lambda: gauges.stats.rounds == 9)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(130, 40), run_before=answer_once)
