"""The chart screen: acceptance rate, τ and tokens/s over the conversation on screen,
per answer and per verify round, drawn in the terminal with plotext (textual-plotext).

The figures are history/charts.py's, built from the finished answers on screen (their
token kinds and stats), so the chat and the HTML export chart the same numbers. The
colours are the theme's token colours. It imports textual-plotext when the screen opens.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from specchat.history.charts import ConversationSeries, conversation_series


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
    """Five charts over the conversation; Esc closes."""

    BINDINGS = [Binding("escape,q,ctrl+d", "dismiss", "Close")]

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
                with Grid(id="charts-grid"):
                    for name in ("acceptance", "tau", "rate", "round-tokens", "round-rate"):
                        yield PlotextPlot(id=f"chart-{name}")
            yield Static("Esc closes · per answer (bars) and per round across the conversation "
                         "(lines)", classes="dialog-hint")

    def on_mount(self) -> None:
        if self.series.empty:
            return
        variables = self.app.theme_variables
        colour = {kind: rgb(variables[f"spec-{kind}"]) for kind in ("accepted", "bonus", "target")}
        answers, rounds = self.series.answers, self.series.rounds
        labels = [f"#{a.number}" for a in answers]
        self.bars("acceptance", "acceptance rate per answer (%)", labels,
                  [None if a.acceptance_rate is None else a.acceptance_rate * 100 for a in answers],
                  colour["accepted"])
        self.bars("tau", "τ per answer", labels, [a.mean_acceptance_length for a in answers],
                  colour["bonus"])
        self.bars("rate", "tokens/s per answer", labels, [a.tokens_per_s for a in answers],
                  colour["target"])
        self.line("round-tokens", "tokens per round", [r.tokens for r in rounds],
                  colour["accepted"])
        self.line("round-rate", "tokens/s per round", [r.tokens_per_s for r in rounds],
                  colour["target"])

    def bars(self, name: str, title: str, labels: list[str], values: list[float | None],
             colour: tuple[int, int, int]) -> None:
        plt = self.query_one(f"#chart-{name}").plt
        plt.title(title)
        plt.bar(labels, [value or 0.0 for value in values], color=colour)

    def line(self, name: str, title: str, values: list[float | None],
             colour: tuple[int, int, int]) -> None:
        plt = self.query_one(f"#chart-{name}").plt
        plt.title(title if any(v is not None for v in values) else f"{title}: no round times")
        points = [(n, v) for n, v in enumerate(values, start=1) if v is not None]
        if points:
            plt.plot([n for n, _ in points], [v for _, v in points], color=colour,
                     marker="braille")
        plt.xlabel("round, across the conversation")
