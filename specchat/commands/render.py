"""Printing answers and statistics for the headless commands.

Tokens are coloured by kind with 24-bit ANSI codes taken from the default theme's
variables when stdout is a terminal; rejected drafts print dim and struck through.
The stats block follows `ollama run --verbose`. Pure formatting: strings in and out.
"""

from __future__ import annotations

from specchat.chat.events import StatsSnapshot, TokenSpan

RESET = "\x1b[0m"


def ansi_colour(hex_colour: str) -> str:
    value = hex_colour.lstrip("#")
    r, g, b = (int(value[i:i + 2], 16) for i in (0, 2, 4))
    return f"\x1b[38;2;{r};{g};{b}m"


def paint(span: TokenSpan, colours: dict[str, str], ghosts: bool = True) -> str:
    """One span as ANSI text; rejected drafts dim and struck through (or hidden)."""
    if span.kind == "rejected":
        if not ghosts or not span.text:
            return ""
        return f"\x1b[2;9m{ansi_colour(colours['rejected'])}{span.text}{RESET}"
    return f"{ansi_colour(colours[span.kind])}{span.text}{RESET}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _num(value: float | None, fmt: str = ".2f", unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{fmt}}{unit}"


def stats_block(stats: StatsSnapshot, stop_reason: str, header: list[tuple[str, str]]) -> str:
    """The multi-line stats summary printed on stderr after an answer."""
    histogram = " ".join(f"{n}:{count}" for n, count in enumerate(stats.histogram)) or "n/a"
    positions = " ".join(f"{v:.2f}" for v in stats.per_position_acceptance) or "n/a"
    rows = header + [
        ("stop reason", stop_reason),
        ("tokens", str(stats.tokens)),
        ("tokens/s (decode)", _num(stats.tokens_per_s, ".1f")),
        ("TTFT", _num(stats.ttft_s, ".3f", " s")),
        ("total duration", _num(stats.elapsed_s, ".2f", " s")),
        ("rounds", str(stats.rounds)),
        ("draft acceptance rate", f"{_pct(stats.acceptance_rate)} ({stats.accepted}/{stats.drafted})"),
        ("mean acceptance length", _num(stats.mean_acceptance_length)),
        ("α (accepted / tested)", _num(stats.alpha, ".3f")),
        ("per-position acceptance", positions),
        ("acceptance histogram", histogram),
        ("time per token p50/p99 (decode)", f"{_num(stats.p50_token_ms, '.1f', ' ms')} / "
                                   f"{_num(stats.p99_token_ms, '.1f', ' ms')}"),
    ]
    width = max(len(label) for label, _ in rows) + 2
    return "\n".join(f"{label + ':':<{width}}{value}" for label, value in rows)
