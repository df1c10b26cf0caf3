"""The app over a real pair's service: the tiny random pair through the real loader,
session and engine (fast), and the built-in SmolLM2 pair (slow)."""

from __future__ import annotations

import pytest
from tui_support import answers, last_answer, streaming, wait_for

from specchat.commands.chat import pair_service
from specchat.models.config.pairs import load_catalog
from specchat.tui.app import create_app
from specchat.tui.commands import palette_entries
from specchat.tui.transcript import Notice

KINDS = {"accepted", "rejected", "resampled", "bonus", "target"}


def palette(app) -> dict:
    """The command palette's entries: title -> what choosing it runs."""
    return {title: callback for title, _, callback in palette_entries(app)}


def real_app(config_file, pair: str, max_new_tokens: int):
    catalog = load_catalog(config_file)

    built = {}

    def factory(name: str):
        built[name] = pair_service(catalog.get(name), None, max_new_tokens, None)
        return built[name]

    app = create_app(factory, [(n, p.description) for n, p in catalog.pairs.items()], pair)
    app.services = built  # the services the app was given, as tui_support.make_app keeps them
    return app


async def answer_and_check(app, pilot, timeout: float) -> None:
    await wait_for(pilot, lambda: app.gauges.baseline is not None, timeout)
    await pilot.press(*"Say hello", "enter")
    await wait_for(pilot, lambda: answers(app) and not streaming(app), timeout)
    spans = last_answer(app).tokens.spans
    assert spans and {s.kind for s in spans} <= KINDS
    assert last_answer(app).text == app.service.turns()[-1][1]  # the pair answering now
    assert app.gauges.stats.tokens >= 1
    assert "cpu" in str(app.gauges.query_one("#g-pair").render())
    assert "speedup:" in str(app.gauges.query_one("#g-speedup").render())


async def test_tiny_pair_answers_in_the_app_through_the_real_loader(tiny_config):
    app = real_app(tiny_config, "tiny", max_new_tokens=16)
    async with app.run_test(size=(140, 45)) as pilot:
        await answer_and_check(app, pilot, timeout=60)
        drafted = app.gauges.stats.drafted
        assert drafted > 0, "the tiny pair has a draft model: rounds should draft"
        await pilot.press("f5")
        await wait_for(pilot, lambda: app.query(Notice), timeout=60)
        assert "texts identical ✓" in str(app.query(Notice).last().render())  # float32, greedy


async def test_switching_to_another_real_pair_carries_the_conversation(tiny_config):
    app = real_app(tiny_config, "tiny", max_new_tokens=8)
    async with app.run_test(size=(140, 45)) as pilot:
        await answer_and_check(app, pilot, timeout=60)
        palette(app)["Switch pair: tiny-ngram"]()
        await wait_for(pilot, lambda: app.sub_title == "tiny-ngram", timeout=60)
        assert app.services["tiny-ngram"].turns()[0] == ("user", "Say hello")


@pytest.mark.slow
async def test_builtin_pair_answers_in_the_app():
    app = real_app(None, "smollm2-135m", max_new_tokens=12)
    async with app.run_test(size=(140, 45)) as pilot:
        await answer_and_check(app, pilot, timeout=600)
        assert app.gauges.info.name == "smollm2-135m"


async def test_k_changed_mid_answer_applies_from_the_next_round(tiny_config):
    app = real_app(tiny_config, "tiny", max_new_tokens=150)
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(pilot, lambda: app.gauges.baseline is not None, 60)
        palette(app)["Slow motion delay = 100 ms"]()
        await pilot.press(*"Count", "enter")
        await wait_for(pilot, lambda: app.gauges.stats and app.gauges.stats.rounds >= 2, 60)
        assert app.gauges.stats.k == 3
        await pilot.press("f10", "f10")
        rounds_then = app.gauges.stats.rounds
        await wait_for(pilot, lambda: not streaming(app), 120)
        assert app.gauges.stats.rounds >= rounds_then + 5
        stats = app.gauges.stats
        assert app.services["tiny"].session.settings.k == 5
        assert len(stats.per_position_acceptance) == 5, "later rounds drafted 5 tokens"


def test_out_of_memory_reads_as_an_actionable_line():
    from specchat.chat.service import describe_error

    class OutOfMemoryError(RuntimeError):
        pass

    text = describe_error(OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert text.startswith("out of memory: pick a smaller pair (F3)")
    assert "\n" not in text


async def test_a_pair_with_k_auto_answers_in_the_chat_and_the_panel_says_auto(tiny_config):
    import dataclasses

    from specchat.commands.chat import build_app

    catalog = load_catalog(tiny_config)
    first = dataclasses.replace(catalog.get("tiny"), k="auto")
    app = build_app(catalog, first, None, None, 16, None)
    async with app.run_test(size=(140, 45)) as pilot:
        await answer_and_check(app, pilot, timeout=60)
        assert "failed" not in str(last_answer(app).status.render())
        assert "k auto" in str(app.gauges.query_one("#g-controls").render())
