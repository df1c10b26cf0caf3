"""A conversation's charts as inline SVG for the HTML export, drawn with pygal.

Per answer: acceptance rate, τ (mean acceptance length) and tokens/s, as bars. Per
round, across the whole conversation: the acceptance rate, the tokens each round
committed and, where the answers saved their round times, each round's tokens/s, as
lines. The charts and their figures are history/charts.py's (`CHARTS`); each is drawn in
its token kind's colour, so the charts read like the tokens above them. A figure that
does not exist (no drafts, no acceptance rate) is a gap, never a 0.

The SVG carries no script and loads nothing: pygal's tooltip configuration script is
left out, and its comments with it. Strings in, strings out; pygal is imported when a
chart is drawn.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from specchat.history.charts import CHARTS, Chart, ConversationSeries

WIDTH, HEIGHT = 560, 240
SCRIPT = re.compile(r"<script\b.*?</script>|<!--.*?-->", re.S)


def tint(colours: dict[str, str], kind: str) -> str:
    """A token kind's colour in the page's colours, else the page's foreground."""
    return colours.get(kind) or colours.get("foreground", "#000000")


def chart_style(colours: dict[str, str], series_colours: tuple[str, ...]):
    from pygal.style import Style

    foreground = colours.get("foreground", "#000000")
    return Style(background="transparent", plot_background="transparent",
                 foreground=foreground, foreground_strong=foreground,
                 foreground_subtle=foreground + "55" if len(foreground) == 7 else foreground,
                 colors=series_colours, font_family="ui-monospace, monospace",
                 title_font_size=15, label_font_size=11, major_label_font_size=11,
                 legend_font_size=12)


def chart(kind: str, title: str, labels: list[str], values: list[float | None], colour: str,
          colours: dict[str, str], **options) -> str:
    """One chart of one series as a bare `<svg>` element (no script, no comments)."""
    return chart_of(kind, title, labels, [(title, values)], (colour,), colours, **options)


def chart_of(kind: str, title: str, labels: list[str],
             series: Sequence[tuple[str, Sequence[Any]]], series_colours: tuple[str, ...],
             colours: dict[str, str], width: int = WIDTH, height: int = HEIGHT,
             **options) -> str:
    """A chart of several named series (a legend where there are two or more)."""
    import pygal

    maker = {"bar": pygal.Bar, "line": pygal.Line, "xy": pygal.XY}[kind]
    settings = {"show_minor_x_labels": False} if kind == "line" else {}
    figure = maker(title=title, style=chart_style(colours, series_colours), width=width,
                   height=height, explicit_size=True, show_legend=len(series) > 1,
                   legend_at_bottom=True, js=[], disable_xml_declaration=True,
                   print_values=False, truncate_label=-1, truncate_legend=-1,
                   include_x_axis=True, **(settings | options))
    if labels:
        figure.x_labels = labels
    for name, values in series:
        figure.add(name, values)
    return SCRIPT.sub("", figure.render(is_unicode=True))


def drawn_chart(spec: Chart, series: ConversationSeries, colours: dict[str, str]) -> str | None:
    """One of `CHARTS` as SVG: bars per answer, a line per round (a gap where a figure
    does not exist); None for a round chart with no figure at all."""
    values = spec.values(series)
    options: dict[str, Any] = {"range": (0, 100)} if spec.percent else {}
    if spec.per == "answer":
        labels = [f"#{a.number}" for a in series.answers]
        return chart("bar", spec.title, labels, values, tint(colours, spec.tint), colours,
                     **options)
    if all(value is None for value in values):
        return None
    options |= {"x_labels_major_every": max(1, len(values) // 12),
                "show_dots": len(values) <= 60, "x_title": "round, across the conversation"}
    labels = [str(n) for n in range(1, len(values) + 1)]
    return chart("line", spec.title, labels, values, tint(colours, spec.tint), colours, **options)


def charts_html(series: ConversationSeries, colours: dict[str, str]) -> str:
    """The charts section of the export page; empty for a conversation with no answer."""
    if series.empty:
        return ""
    figures = [svg for spec in CHARTS if (svg := drawn_chart(spec, series, colours))]
    note = ("" if any(r.tokens_per_s for r in series.rounds) else
            '<p class="meta">(no round times saved: tokens/s per round is not drawn)</p>')
    return ('<section class="charts"><h2>Charts</h2>'
            + "".join(f'<figure>{svg}</figure>' for svg in figures)
            + note + "</section>")
