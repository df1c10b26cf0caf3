"""Helpers for the TUI tests: an app over scripted services, waiting on conditions,
and reading what the app shows (answers, gauges, the colours a TokenText draws) and
what it saved (the history database), never the app's internals."""

from __future__ import annotations

import asyncio
import itertools

from specchat.history.store import HistoryStore, SavedConversation
from specchat.tui.app import create_app
from specchat.chat.scripted import FakeConfig, ScriptedService, ScriptedRound
from specchat.tui.gauges import Gauges
from specchat.tui.transcript import AnswerView


class StepClock:
    """A clock that advances a fixed step per reading: deterministic rates."""

    def __init__(self, step: float = 0.01):
        self.counter = itertools.count()
        self.step = step

    def __call__(self) -> float:
        return next(self.counter) * self.step


ROUNDS = [
    ScriptedRound(("Hello",), (" ghost",), " world", "resampled"),
    ScriptedRound((" a", " b"), (), " c", "bonus"),
    ScriptedRound((), (" nope", " never"), " done.", "resampled"),
]
"""k = 2: acceptance 3/6, τ = 6 tokens / 3 rounds = 2.00, per position 2/3 and 1/3."""


def make_app(configs: dict[str, FakeConfig] | None = None, first: str = "fake", **options):
    """An app whose pairs are scripted services; `app.services[name]` are the instances built."""
    configs = configs or {"fake": FakeConfig(name="fake", k=2, rounds=ROUNDS, clock=StepClock())}
    built: dict[str, ScriptedService] = {}

    def factory(name: str) -> ScriptedService:
        built[name] = ScriptedService(configs[name])
        return built[name]

    app = create_app(factory, [(name, "scripted") for name in configs], first, **options)
    app.services = built
    return app


async def wait_for(pilot, condition, timeout: float = 10.0) -> None:
    """Let the app run until condition() holds (fails the test after `timeout`)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.02)


def answers(app) -> list[AnswerView]:
    """The answers in the transcript, oldest first."""
    return list(app.query(AnswerView))


def last_answer(app) -> AnswerView | None:
    views = answers(app)
    return views[-1] if views else None


def streaming(app) -> bool:
    """An answer on screen is still streaming (it has no status line yet)."""
    view = last_answer(app)
    return view is not None and not view.finished


async def ready(pilot) -> None:
    """The pair has loaded and its target-only baseline is on the gauges."""
    await wait_for(pilot, lambda: any(g.baseline is not None for g in pilot.app.query(Gauges)))


async def ask(pilot, text: str = "hi") -> None:
    """Type a message, send it, wait for its answer to finish."""
    before = len(answers(pilot.app))
    await pilot.press(*text)
    await pilot.press("enter")
    await wait_for(pilot, lambda: len(answers(pilot.app)) > before and not streaming(pilot.app))
    await pilot.pause()


async def pick_pair(pilot, name: str) -> None:
    """F3, then choose the pair by name in the picker."""
    await pilot.press("f3")
    await wait_for(pilot, lambda: pilot.app.screen.query("#pair-list"))
    options = pilot.app.screen.query_one("#pair-list")
    options.highlighted = options.get_option_index(name)
    await pilot.press("enter")


def saved_conversation() -> SavedConversation:
    """The most recently updated conversation of the history database, read on its own
    connection (what is committed, not what the app holds)."""
    store = HistoryStore()
    try:
        return store.load(store.list_conversations()[0].id)
    finally:
        store.close()


def drawn(flow) -> list[tuple[str, str | None, bool]]:
    """(text, colour hex, struck through) for each styled run an answer draws."""
    out = []
    for text, style in flow.drawn():
        colour = style.foreground.hex.lower() if style.foreground else None
        out.append((text, colour, bool(style.strike)))
    return out
