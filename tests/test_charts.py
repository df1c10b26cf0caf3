"""The conversation's charts (issue 26, item 2): rounds read back from token kinds, the
per-answer figures as saved, the HTML export's inline SVG (bars as tall as the figures,
in the theme's token colours, nothing to fetch), and the chart screen in the chat."""

from __future__ import annotations

import re

import pytest

from specchat.history import export
from specchat.history.charts import conversation_series, rounds_of, saved_series
from specchat.history.store import HistoryStore, SavedToken

COLOURS = {"accepted": "#00aa00", "rejected": "#aa0000", "resampled": "#aaaa00",
           "bonus": "#0000aa", "target": "#111111", "foreground": "#eeeeee",
           "background": "#000000"}


def test_rounds_are_the_drafts_up_to_each_target_token():
    kinds = ["accepted", "rejected", "resampled",      # drafted 2, kept 1
             "accepted", "accepted", "bonus",          # drafted 2, kept 2
             "target",                                 # drafted nothing
             "rejected", "rejected", "resampled",      # drafted 2, kept 0
             "accepted"]                               # stopped mid-round: no round
    assert rounds_of(kinds) == [(2, 1), (2, 2), (0, 0), (2, 0)]


def test_round_tokens_per_s_come_from_the_saved_round_times_when_they_match():
    kinds = ["accepted", "rejected", "resampled", "accepted", "accepted", "bonus"]
    timed = conversation_series([(kinds, {"round_ms": [100.0, 50.0]})])
    assert [r.tokens for r in timed.rounds] == [2, 3]
    assert [r.tokens_per_s for r in timed.rounds] == pytest.approx([20.0, 60.0])
    assert [r.acceptance_rate for r in timed.rounds] == [0.5, 1.0]
    untimed = conversation_series([(kinds, {"round_ms": [100.0]})])  # not one per round
    assert [r.tokens_per_s for r in untimed.rounds] == [None, None]


def saved_two_answers(tmp_path):
    store = HistoryStore(tmp_path / "h.sqlite3")
    conversation = store.new_conversation("Two answers", "tiny")
    for n, (kinds, stats) in enumerate([
        (["accepted", "rejected", "rejected", "resampled"] * 2,
         {"acceptance_rate": 0.25, "mean_acceptance_length": 1.5, "tokens_per_s": 10.0,
          "round_ms": [100.0, 100.0]}),
        (["accepted", "accepted", "accepted", "rejected", "resampled"] * 2,
         {"acceptance_rate": 0.75, "mean_acceptance_length": 4.0, "tokens_per_s": 30.0,
          "round_ms": [50.0, 50.0]})]):
        store.add_user_turn(conversation, f"question {n}")
        answer = store.start_answer(conversation, "speculative k=3")
        store.append_tokens(answer, [SavedToken(f" t{i}", kind, i) for i, kind in enumerate(kinds)])
        store.finish_answer(answer, "text", "done", stats)
    loaded = store.load(conversation)
    store.close()
    return loaded


def bar_heights(svg: str) -> list[float]:
    return [float(h) for h in re.findall(
        r'<rect [^>]*height="([0-9.]+)" class="rect reactive tooltip-trigger"', svg)]


def figures(page: str) -> dict[str, str]:
    """Each chart's SVG by its title."""
    found = {}
    for svg in re.findall(r"<figure>(<svg.*?</svg>)</figure>", page, re.S):
        title = re.search(r"<title>([^<]+)</title>", svg).group(1)
        found[title] = svg
    return found


def test_the_html_export_draws_each_answer_and_round_in_the_theme_colours(tmp_path):
    conversation = saved_two_answers(tmp_path)
    assert [a.acceptance_rate for a in saved_series(conversation).answers] == [0.25, 0.75]
    page = export.to_html(conversation, COLOURS)
    charts = figures(page)
    assert set(charts) == {"acceptance rate per answer (%)", "τ per answer (tokens per round)",
                           "tokens/s per answer", "acceptance rate per round (%)",
                           "tokens per round (τ of each round)", "tokens/s per round"}
    low, high = bar_heights(charts["acceptance rate per answer (%)"])
    assert high == pytest.approx(3 * low, rel=0.01)  # 75% against 25% on a 0-100 axis
    assert "fill:#00aa00" in charts["acceptance rate per answer (%)"]
    assert "fill:#0000aa" in charts["τ per answer (tokens per round)"]
    assert "<script" not in page and "<!--" not in page


def test_a_conversation_without_answers_has_no_charts(tmp_path):
    store = HistoryStore(tmp_path / "h.sqlite3")
    conversation = store.new_conversation("Only a question", "tiny")
    store.add_user_turn(conversation, "hello?")
    page = export.to_html(store.load(conversation), COLOURS)
    assert "<svg" not in page and "Charts" not in page


async def test_ctrl_d_charts_every_finished_answer_and_round_of_the_conversation():
    from textual_plotext import PlotextPlot
    from tui_support import ask, make_app, ready, wait_for

    from specchat.tui.charts import ChartsScreen

    app = make_app()
    async with app.run_test(size=(150, 45)) as pilot:
        await ready(pilot)
        await ask(pilot, "first")
        await ask(pilot, "second")
        await pilot.press("ctrl+d")
        await wait_for(pilot, lambda: isinstance(app.screen, ChartsScreen))
        await pilot.pause(0.2)
        screen = app.screen
        assert len(screen.query(PlotextPlot)) == 6
        series = screen.series
        assert [a.acceptance_rate for a in series.answers] == [0.5, 0.5]  # 3 of 6 drafts, twice
        assert [a.mean_acceptance_length for a in series.answers] == [2.0, 2.0]
        assert [r.tokens for r in series.rounds] == [2, 3, 1, 2, 3, 1]
        assert all(r.tokens_per_s and r.tokens_per_s > 0 for r in series.rounds)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ChartsScreen))


async def test_the_charts_of_an_empty_chat_say_what_will_come():
    from tui_support import make_app, ready, wait_for

    app = make_app()
    async with app.run_test(size=(150, 45)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+d")
        await wait_for(pilot, lambda: app.screen.query("#charts-empty"))


def test_acceptance_per_round_is_each_rounds_own_and_absent_where_nothing_was_drafted():
    from specchat.history.charts import CHARTS

    kinds = ["accepted", "rejected", "resampled", "target", "accepted", "accepted", "bonus"]
    series = conversation_series([(kinds, None)])
    per_round = next(chart for chart in CHARTS if chart.name == "round-acceptance")
    assert per_round.values(series) == [50.0, None, 100.0]


def columns_of(plot_text: str, mark: str) -> list[int]:
    """The columns of a mark in the line where it appears (the x labels)."""
    lines = [line for line in plot_text.splitlines() if mark in line]
    assert lines, f"no {mark!r} in the chart:\n{plot_text}"
    return [i for i in range(len(lines[0])) if lines[0].startswith(mark, i)]


def bar_in_column(plot_text: str, column: int) -> bool:
    return any(len(line) > column and line[column] == "█" for line in plot_text.splitlines())


def y_axis_labels(plot_text: str) -> list[float]:
    """The y-axis tick values of a plotext chart, top to bottom."""
    return [float(m) for m in re.findall(r"^\s*(-?[0-9.]+)┤", plot_text, re.M)]


async def charts_after(pilot, *prompts_and_keys: str):
    from tui_support import ask, ready, wait_for

    from specchat.tui.charts import ChartsScreen

    await ready(pilot)
    for item in prompts_and_keys:
        if item.startswith("key:"):
            await pilot.press(item.removeprefix("key:"))
        else:
            await ask(pilot, item)
    await pilot.press("ctrl+d")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ChartsScreen))
    await pilot.pause(0.3)
    return pilot.app.screen


def plot_text(screen, name: str) -> str:
    return screen.query_one(f"#chart-{name}").render().plain


async def test_an_answer_without_drafts_has_no_acceptance_bar_where_a_0_would_lie():
    from tui_support import make_app

    app = make_app()
    async with app.run_test(size=(150, 45)) as pilot:
        screen = await charts_after(pilot, "first", "key:ctrl+s", "second")
        assert [a.acceptance_rate for a in screen.series.answers] == [0.5, None]
        acceptance = plot_text(screen, "answer-acceptance")
        first, second = columns_of(acceptance, "#1")[0], columns_of(acceptance, "#2 n/a")[0]
        assert bar_in_column(acceptance, first + 1) and not bar_in_column(acceptance, second + 1)
        assert "#1 n/a" not in acceptance
        tau = plot_text(screen, "answer-tau")  # target-only τ is 1: a bar, no n/a
        assert bar_in_column(tau, columns_of(tau, "#2")[0] + 1) and "n/a" not in tau


async def test_a_conversation_without_drafts_says_acceptance_is_n_a_in_its_title():
    from tui_support import make_app

    app = make_app()
    async with app.run_test(size=(150, 45)) as pilot:
        screen = await charts_after(pilot, "key:ctrl+s", "first", "second")
        assert "n/a, no answer drafted" in plot_text(screen, "answer-acceptance")
        assert "n/a" not in plot_text(screen, "answer-tau")


async def test_at_80x24_every_chart_is_legible_and_scrolls_into_view():
    from textual_plotext import PlotextPlot
    from tui_support import make_app

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await charts_after(pilot, "first", "second")
        scroll = screen.query_one("#charts-scroll")
        for plot in screen.query(PlotextPlot):
            scroll.scroll_to_widget(plot, animate=False)
            await pilot.pause(0.1)
            assert plot.size.height >= 10, (plot.id, plot.size)
            assert scroll.region.contains_region(plot.region), plot.id
            ticks = y_axis_labels(plot.render().plain)
            assert len(ticks) >= 3 and ticks == sorted(ticks, reverse=True), (plot.id, ticks)
