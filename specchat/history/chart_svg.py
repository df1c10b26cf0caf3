"""A conversation's charts as inline SVG for the HTML export, drawn with pygal.

Per answer: acceptance rate, τ (mean acceptance length) and tokens/s, as bars. Per
round, across the whole conversation: the tokens each round committed and, where the
answers saved their round times, each round's tokens/s, as lines. The figures are
history/charts.py's; the colours are the theme's token colours (accepted for acceptance,
bonus for τ, the target's for tokens/s), so the charts read like the tokens above them.

The SVG carries no script and loads nothing: pygal's tooltip configuration script is
left out, and its comments with it. Strings in, strings out; pygal is imported when a
chart is drawn.
"""

from __future__ import annotations

import re

from specchat.history.charts import ConversationSeries

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
             series: list[tuple[str, list[float | None]]], series_colours: tuple[str, ...],
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


def answer_charts(series: ConversationSeries, colours: dict[str, str]) -> list[str]:
    labels = [f"#{a.number}" for a in series.answers]
    acceptance = [None if a.acceptance_rate is None else a.acceptance_rate * 100
                  for a in series.answers]
    return [
        chart("bar", "acceptance rate per answer (%)", labels, acceptance,
              tint(colours, "accepted"), colours, range=(0, 100)),
        chart("bar", "τ per answer (tokens per round)", labels,
              [a.mean_acceptance_length for a in series.answers], tint(colours, "bonus"), colours),
        chart("bar", "tokens/s per answer", labels, [a.tokens_per_s for a in series.answers],
              tint(colours, "target"), colours),
    ]


def round_charts(series: ConversationSeries, colours: dict[str, str]) -> list[str]:
    rounds = series.rounds
    if not rounds:
        return []
    labels = [str(n) for n in range(1, len(rounds) + 1)]
    every = max(1, len(rounds) // 12)
    options = {"x_labels_major_every": every, "show_dots": len(rounds) <= 60,
               "x_title": "round, across the conversation"}
    drawn = [chart("line", "tokens per round", labels, [r.tokens for r in rounds],
                   tint(colours, "accepted"), colours, **options)]
    if any(r.tokens_per_s is not None for r in rounds):
        drawn.append(chart("line", "tokens/s per round", labels,
                           [r.tokens_per_s for r in rounds], tint(colours, "target"), colours,
                           **options))
    return drawn


def charts_html(series: ConversationSeries, colours: dict[str, str]) -> str:
    """The charts section of the export page; empty for a conversation with no answer."""
    if series.empty:
        return ""
    figures = answer_charts(series, colours) + round_charts(series, colours)
    note = ("" if any(r.tokens_per_s for r in series.rounds) else
            '<p class="meta">(no round times saved: tokens/s per round is not drawn)</p>')
    return ('<section class="charts"><h2>Charts</h2>'
            + "".join(f'<figure>{svg}</figure>' for svg in figures)
            + note + "</section>")
