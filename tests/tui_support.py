"""Helpers for the TUI tests: an app over scripted backends, waiting on conditions,
and reading the colours a TokenText draws."""

from __future__ import annotations

import asyncio
import itertools

from specchat.tui.app import create_app
from specchat.tui.fake_backend import FakeConfig, ScriptedBackend, ScriptedRound


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
    """An app whose pairs are scripted backends; `app.backends[name]` are the instances built."""
    configs = configs or {"fake": FakeConfig(name="fake", k=2, rounds=ROUNDS, clock=StepClock())}
    built: dict[str, ScriptedBackend] = {}

    def factory(name: str) -> ScriptedBackend:
        built[name] = ScriptedBackend(configs[name])
        return built[name]

    app = create_app(factory, [(name, "scripted") for name in configs], first, **options)
    app.backends = built
    return app


async def wait_for(pilot, condition, timeout: float = 10.0) -> None:
    """Let the app run until condition() holds (fails the test after `timeout`)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.02)


async def ready(pilot) -> None:
    await wait_for(pilot, lambda: pilot.app.backend is not None and pilot.app.gauges.calibration)


async def ask(pilot, text: str = "hi") -> None:
    """Type a message, send it, wait for the answer to finish."""
    await pilot.press(*text)
    await pilot.press("enter")
    await wait_for(pilot, lambda: pilot.app.job is None and pilot.app.last_answer is not None)
    await pilot.pause()


def drawn(flow) -> list[tuple[str, str | None, bool]]:
    """(text, colour hex, struck through) for each styled run an answer draws."""
    out = []
    for text, style in flow.drawn():
        colour = style.foreground.hex.lower() if style.foreground else None
        out.append((text, colour, bool(style.strike)))
    return out
