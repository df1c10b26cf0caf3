"""`bench --html FILE`: a benchmark report as one self-contained HTML page.

From the report's JSON (`as_dict` of run, sweep, profile or overhead): the run's
conditions (command, pair, backends, device, dtype, repeats, CPU flags), tokens/s per
category with one bar per arm (specchat speculative and target-only beside transformers
or llama.cpp's own programs, whichever the run measured), the same figures as a table,
and for `bench profile` the verify cost v(n) beside the break-even line: the dearest
verify at which drafting n − 1 tokens still pays at the run's measured α and c (and at
α = 1, where no draft can do better), from engine/theory.py. The charts are
history/chart_svg.py's inline SVG: the page has no script and loads nothing.
"""

from __future__ import annotations

import html
import itertools
from typing import Any

from specchat.engine.theory import break_even_verify_cost
from specchat.history.chart_svg import chart_of
from specchat.theme_files import load_theme, page_colours

REPORT_THEME = "specchat-light"
REPORT_WIDTH = 900
META_KEYS = ("command", "pair", "target", "draft", "k", "backends", "device", "dtype",
             "temperature", "max_new_tokens", "repeats", "prompt_count", "prompts_file",
             "cpu_flags")


OTHER_ARM_COLOURS = ("#7f8c8d", "#c0392b", "#8e44ad", "#d35400", "#16a085", "#2c3e50",
                     "#b7950b", "#1f618d", "#6e2c00", "#5b2c6f", "#117864", "#943126")
"""The other arms' tones, in turn (a sweep has one arm per k, and llama.cpp's per k too;
past the last, they repeat)."""


def arm_colours(arms: list[str], colours: dict[str, str]) -> tuple[str, ...]:
    """specchat's arms in the theme's token colours, the other engines in neutral tones."""
    fixed = {"spec": colours["accepted"], "target": colours["target"]}
    others = itertools.cycle(OTHER_ARM_COLOURS)
    return tuple(fixed.get(arm) or next(others) for arm in arms)


def category_rates(report: dict) -> tuple[list[str], list[str], dict[str, list[float | None]]]:
    """(categories with "total" last, arm keys, tokens/s per arm in category order)."""
    groups = dict(report.get("categories") or {}) | {"total": report.get("total") or {}}
    arms = list(report.get("arms") or {})
    rates = {arm: [((group.get("arms") or {}).get(arm) or {}).get("tokens_per_s")
                   for group in groups.values()] for arm in arms}
    return list(groups), arms, rates


def rates_chart(report: dict, colours: dict[str, str]) -> str:
    categories, arms, rates = category_rates(report)
    if not arms:
        return ""
    names = report.get("arms") or {}
    return chart_of("bar", "tokens/s per category", categories,
                    [(names.get(arm, arm), rates[arm]) for arm in arms],
                    arm_colours(arms, colours), colours, width=REPORT_WIDTH, height=420,
                    legend_at_bottom_columns=2)


def verify_chart(report: dict, colours: dict[str, str]) -> str:
    """v(n) for n = 1.. beside the break-even verify cost of drafting n − 1 tokens."""
    profile = report.get("profile") or {}
    v = {int(n): cost for n, cost in (profile.get("v") or {}).items()}
    c, alpha = profile.get("c"), profile.get("pooled_alpha")
    if not v or c is None:
        return ""
    ns = sorted(v)
    series = [("v(n): measured verify cost, in target steps", [(n, v[n]) for n in ns])]
    if alpha is not None:
        series.append((f"break-even at the measured α = {alpha:.2f}, c = {c:.2f}",
                       break_even_points(alpha, c, v[1], ns)))
    series.append(("break-even at α = 1 (every draft accepted)",
                   break_even_points(1.0, c, v[1], ns)))
    return chart_of("xy", "verify cost v(n) and the break-even line: below it, k = n − 1 pays",
                    [], series, (colours["target"], colours["accepted"], colours["bonus"]),
                    colours, width=REPORT_WIDTH, height=460, legend_at_bottom_columns=1,
                    x_title="n: tokens verified (k + 1)", dots_size=3)


def break_even_points(alpha: float, c: float, plain: float, ns: list[int]) -> list[tuple]:
    """(n, dearest verify cost at which k = n − 1 pays) where one does (above zero)."""
    points = [(n, break_even_verify_cost(alpha, n - 1, c, plain)) for n in ns]
    return [(n, cost) for n, cost in points if cost > 0]


def rates_table(report: dict) -> str:
    categories, arms, rates = category_rates(report)
    names = report.get("arms") or {}
    head = "".join(f"<th>{html.escape(names.get(arm, arm))}</th>" for arm in arms)
    rows = "".join(
        f"<tr><th>{html.escape(category)}</th>"
        + "".join(f"<td>{'' if rates[arm][i] is None else f'{rates[arm][i]:.1f}'}</td>"
                  for arm in arms) + "</tr>"
        for i, category in enumerate(categories))
    return f"<table><tr><th>tokens/s</th>{head}</tr>{rows}</table>"


def meta_list(report: dict) -> str:
    items = "".join(f"<dt>{key}</dt><dd>{html.escape(str(report[key]))}</dd>"
                    for key in META_KEYS if report.get(key) not in (None, "", {}))
    return f"<dl>{items}</dl>"


def to_html(report: dict, title: str = "specchat bench report") -> str:
    """The whole page for a report's JSON."""
    spec = load_theme(REPORT_THEME)
    colours = page_colours(spec.colors, spec.variables)
    charts = "".join(f"<figure>{svg}</figure>" for svg in (rates_chart(report, colours),
                                                           verify_chart(report, colours)) if svg)
    style = (f"body{{background:{colours['background']};color:{colours['foreground']};"
             "font-family:ui-monospace,monospace;max-width:64em;margin:2em auto;padding:0 1em}"
             "dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em}dt{opacity:.7}"
             "dd{margin:0;word-break:break-all}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #8888;padding:.2em .6em;text-align:right}"
             "figure{margin:1em 0}svg{width:100%;height:auto}")
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}'
            f"</title><style>{style}</style></head><body><h1>{html.escape(title)}</h1>"
            f"{meta_list(report)}{charts}{rates_table(report)}</body></html>\n")
