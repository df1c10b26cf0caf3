"""The chart screen: acceptance rate, τ and tokens/s over the conversation on screen,
per answer and per verify round, drawn in the terminal with plotext (textual-plotext).

The charts and their figures are history/charts.py's (`CHARTS`), built from the finished
answers on screen (their token kinds and stats), so the chat and the HTML export chart
the same numbers. The colours are the theme's token colours. It imports textual-plotext when the screen opens.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from specchat.history.charts import CHARTS, Chart, ConversationSeries, conversation_series
from specchat.tui.keys import dialog_bindings, dialog_hint, keymap_of


class ConversationCharts:
    """What Ctrl+D does: the charts of the answers in the transcript."""

    def __init__(self, transcript: Any):
        self.transcript = transcript

    def series(self) -> ConversationSeries:
        from specchat.tui.transcript import AnswerView

        views = [view for view in self.transcript.query(AnswerView) if view.finished]
        return conversation_series(([span.kind for span in view.tokens.spans],
                                    view.stats.as_dict() if view.stats else None)
                                   for view in views)

    def action_show_charts(self) -> None:
        self.transcript.app.push_screen(ChartsScreen(self.series()))


def rgb(colour: str) -> tuple[int, int, int]:
    """A theme colour ("#9ece6a") as plotext's (r, g, b)."""
    from textual.color import Color

    parsed = Color.parse(colour)
    return parsed.r, parsed.g, parsed.b


class ChartsScreen(ModalScreen[None]):
    """The charts of `CHARTS` over the conversation: the per-answer bars side by side, the
    per-round lines below, sharing the dialog's height but each at least `MIN_HEIGHT` rows
    tall (the dialog scrolls where the terminal is smaller: at 80x24 one chart or row of
    bars at a time). Esc closes."""

    BINDINGS = dialog_bindings("charts")
    MIN_HEIGHT = 12
    """Rows a chart needs to stay legible (its axis ticks in order, its title)."""
    HINT = ("↑↓ PgUp PgDn scroll · bars per answer, lines per round across the "
            "conversation; n/a or a gap: no figure (no drafts, no round times)")

    def __init__(self, series: ConversationSeries):
        super().__init__()
        self.series = series

    def compose(self) -> ComposeResult:
        from textual_plotext import PlotextPlot

        with Vertical(classes="dialog charts-dialog"):
            if self.series.empty:
                yield Static("No finished answer yet: the charts fill in as the chat goes on.",
                             id="charts-empty")
            else:
                with VerticalScroll(id="charts-scroll"):
                    with Horizontal(id="charts-answers"):
                        for spec in CHARTS:
                            if spec.per == "answer":
                                yield PlotextPlot(id=f"chart-{spec.name}")
                    for spec in CHARTS:
                        if spec.per == "round":
                            yield PlotextPlot(id=f"chart-{spec.name}", classes="round-chart")
            yield Static(f"{dialog_hint('charts', keymap_of(self))} · {self.HINT}",
                         classes="dialog-hint")

    def on_resize(self) -> None:
        self.fit_rows()

    def fit_rows(self) -> None:
        """Every row of charts an equal share of the dialog, at least `MIN_HEIGHT` rows."""
        rows = self.query("#charts-answers, .round-chart")
        if not rows:
            return
        share = self.query_one("#charts-scroll").size.height // len(rows)
        for row in rows:
            row.styles.height = max(self.MIN_HEIGHT, share)

    def on_mount(self) -> None:
        if self.series.empty:
            return
        self.call_after_refresh(self.fit_rows)
        from textual_plotext import PlotextPlot

        variables = self.app.theme_variables
        for spec in CHARTS:
            plt = self.query_one(f"#chart-{spec.name}", PlotextPlot).plt
            colour = rgb(variables[f"spec-{spec.tint}"])
            draw = bars if spec.per == "answer" else lines
            draw(plt, spec, spec.values(self.series), colour)
            if spec.percent:
                plt.ylim(0, 100)


def bars(plt, spec: Chart, values: list[float | None], colour: tuple[int, int, int]) -> None:
    """One bar per answer at its place; where the answer has no such figure (no drafts: no
    acceptance rate), no bar and "n/a" under its number, never a bar of 0. Where no answer
    has one, plotext draws no axes (nor their n/a), so the title says it."""
    present = [(n, value) for n, value in enumerate(values, start=1) if value is not None]
    title = spec.short or spec.title
    plt.title(title if present else f"{title}: n/a, no answer drafted")
    if present:
        plt.bar([n for n, _ in present], [value for _, value in present], color=colour)
    labels = [f"#{n}" if value is not None else f"#{n} n/a" for n, value in enumerate(values, 1)]
    plt.xticks(list(range(1, len(values) + 1)), labels)
    plt.xlim(0.5, len(values) + 0.5)


def lines(plt, spec: Chart, values: list[float | None], colour: tuple[int, int, int]) -> None:
    """The rounds as a line, broken where a round has no such figure."""
    drawn = any(value is not None for value in values)
    plt.title(spec.title if drawn else f"{spec.title}: no figure in any round")
    for run in runs(values):
        plt.plot([n for n, _ in run], [value for _, value in run], color=colour,
                 marker="braille")
    plt.xlim(1, max(2, len(values)))
    plt.xlabel("round, across the conversation")


def runs(values: list[float | None]) -> list[list[tuple[int, float]]]:
    """The (round number, value) stretches between the rounds without a figure."""
    stretches: list[list[tuple[int, float]]] = [[]]
    for n, value in enumerate(values, start=1):
        if value is None:
            stretches.append([])
        else:
            stretches[-1].append((n, value))
    return [stretch for stretch in stretches if stretch]
