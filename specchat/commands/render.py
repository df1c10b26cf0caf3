"""Printing answers and statistics for the headless commands.

Tokens are coloured by kind with the default theme's variables as rich styles;
rich's console turns them into what the terminal can show (24-bit, 256 or 16
colours, none under NO_COLOR). Rejected drafts print dim and struck through (a newline in
one as ↵); a cross-tokenizer draft's token that is not one of the draft's own tokens is
underlined.
Model text is untrusted: its control characters print visibly (specchat/control_chars.py),
never raw.
The stats block follows `ollama run --verbose`. Pure formatting: spans in, rich
text or strings out; knows nothing about where they are printed.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from specchat.chat.events import StatsSnapshot, TokenSpan
from specchat.control_chars import visible, visible_ghost


def paint(span: TokenSpan, colours: dict[str, str], ghosts: bool = True) -> Text:
    """One span as styled text; rejected drafts dim and struck through (or hidden)."""
    if span.kind == "rejected":
        if not ghosts or not span.text:
            return Text("")
        ghost = Style(color=colours["rejected"], dim=True, strike=True, underline=span.unaligned)
        return Text(visible_ghost(span.text), ghost)
    return Text(visible(span.text), Style(color=colours[span.kind], underline=span.unaligned))


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
