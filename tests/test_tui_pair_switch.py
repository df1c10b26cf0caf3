"""Switching pairs in the chat, as a user comparing pairs does it: F3, pick, and again.

- A pair that is replaced gives its memory back. The chat freezes the garbage collector's
  view of long-lived objects (against pauses while tokens stream); a model's objects refer
  to each other, so a replaced pair frozen with them stayed in memory for good: 1.6 GB more
  at every switch to the Qwen2.5-Coder head pair and back, 2026-11-29 (docs/choices.md).
- The pair that takes over measures its target-only baseline at once, also when the pair
  before it was still measuring its own: that one stops, and the new pair's gauge did not
  wait for an answer to end to start measuring.
- A load that a newer pick superseded stops at its next step, instead of loading to the end
  beside the pair the user wants (on 2 cores, twice as slow).

Keys through the app, over scripted pairs."""

from __future__ import annotations

import threading
import weakref

from tui_support import pick_pair, wait_for

from specchat.chat.scripted import FakeConfig, ScriptedService
from specchat.tui.app import create_app
from specchat.tui.gauges import Gauges

SIZE = (120, 40)


def app_over(configs: dict[str, FakeConfig], first: str):
    """An app whose factory keeps only weak references to the services it builds."""
    built: dict[str, list[weakref.ref]] = {name: [] for name in configs}

    def factory(name: str) -> ScriptedService:
        service = ScriptedService(configs[name])
        service.parts = {"the service itself": service}  # a model's objects form cycles too
        built[name].append(weakref.ref(service))
        return service

    app = create_app(factory, [(name, "scripted") for name in configs], first)
    app.built = built
    return app


def answering(app, name: str) -> bool:
    """The header names the pair and its gauges show it loaded."""
    return app.sub_title == name and app.query_one(Gauges).info is not None


def alive(app, name: str) -> int:
    return sum(ref() is not None for ref in app.built[name])


def worker_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("specchat-worker")]


async def test_a_replaced_pair_is_freed_though_its_objects_refer_to_each_other():
    app = app_over({"a": FakeConfig(name="a"), "b": FakeConfig(name="b")}, "a")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: answering(app, "a"))
        for there, back in (("b", "a"), ("a", "b"), ("b", "a")):
            await pick_pair(pilot, there)
            await wait_for(pilot, lambda: answering(app, there))
            await pilot.pause()
            assert alive(app, back) == 0, f"pair {back} stayed in memory after {there} took over"
            assert alive(app, there) == 1


async def test_the_new_pair_measures_its_baseline_though_the_old_one_was_measuring():
    slow = FakeConfig(name="slow", baseline_s=60.0)  # stops early only when asked to
    app = app_over({"slow": slow, "b": FakeConfig(name="b")}, "slow")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: answering(app, "slow")
                       and "measuring" in app.query_one(Gauges).status)
        await pick_pair(pilot, "b")
        await wait_for(pilot, lambda: answering(app, "b"))
        gauges = app.query_one(Gauges)
        await wait_for(pilot, lambda: gauges.baseline is not None, timeout=5.0)
        assert gauges.status.startswith("ready · target-only measured")


async def test_a_load_superseded_by_a_newer_pick_stops_at_its_next_step():
    slow = FakeConfig(name="slow", load_s=30.0, load_steps=300)
    app = app_over({"slow": slow, "b": FakeConfig(name="b")}, "b")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: answering(app, "b"))
        await pick_pair(pilot, "slow")
        await wait_for(pilot, lambda: "loading scripted pair slow" in app.query_one(Gauges).status)
        await pick_pair(pilot, "b")
        await wait_for(pilot, lambda: alive(app, "b") == 1 and app.built["b"][0]() is None)
        await wait_for(pilot, lambda: not worker_threads(), timeout=3.0)
        gauges = app.query_one(Gauges)
        assert answering(app, "b") and gauges.status.startswith("ready")
        assert not app.chat_screen.problems.display  # stopping is not a failure
