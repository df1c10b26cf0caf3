"""The headless commands' colours and progress go through rich: token colours fall
back to what the terminal can show and vanish under NO_COLOR; progress is a bar with
rate and ETA on a terminal and plain lines otherwise."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from specchat.chat.events import TokenSpan
from specchat.commands.progress import StepBar
from specchat.commands.render import paint

COLOURS = {"accepted": "#22aa44", "rejected": "#cc3333", "resampled": "#3366ff",
           "bonus": "#ffaa00", "target": "#aaaaaa"}
SPANS = [TokenSpan("Hello", "accepted", 1), TokenSpan(" ghost", "rejected", 2),
         TokenSpan(" world", "resampled", 3)]


def printed(console_options: dict, shade: int = 0) -> str:
    """The spans as a console prints them. rich caches a combined style's codes for the
    first colour system it met, so each colour system gets colours of its own (`shade`)."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200, **console_options)
    colours = {kind: f"#{int(hex_[1:], 16) + shade:06x}" for kind, hex_ in COLOURS.items()}
    for span in SPANS:
        console.print(paint(span, colours), end="")
    return out.getvalue()


def test_truecolour_terminal_gets_the_theme_colour_exactly():
    assert "\x1b[38;2;34;170;68m" in printed({"color_system": "truecolor"})


def test_256_and_16_colour_terminals_get_codes_they_can_show():
    eight_bit = printed({"color_system": "256"}, shade=1)
    assert "38;5;" in eight_bit and "38;2;" not in eight_bit
    standard = printed({"color_system": "standard"}, shade=2)
    assert "38;5;" not in standard and "38;2;" not in standard and "\x1b[" in standard


def test_no_color_drops_the_colours_but_keeps_the_text(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    out = printed({}, shade=3)
    assert "38;" not in out
    assert "Hello" in out and " world" in out


def test_rejected_drafts_print_dim_and_struck_through_or_not_at_all():
    ghost = paint(SPANS[1], COLOURS)
    assert ghost.plain == " ghost" and ghost.style.strike and ghost.style.dim
    assert paint(SPANS[1], COLOURS, ghosts=False).plain == ""


def test_a_rejected_drafts_newline_prints_as_a_mark_not_a_line_break():
    guessed = paint(TokenSpan(".\n", "rejected", 7), COLOURS)
    assert guessed.plain == ".↵" and guessed.style.strike
    assert paint(TokenSpan(".\n", "accepted", 7), COLOURS).plain == ".\n"


def test_progress_off_a_terminal_is_one_plain_line_per_update():
    out = io.StringIO()
    bar = StepBar(Console(file=out, force_terminal=False), "prompts", 3, "prompt")
    bar.advance("[a] tokens/s: 10.0", keep=True)
    bar.advance("[b] tokens/s: 11.0", keep=True)
    bar.close()
    assert out.getvalue().splitlines() == ["prompts 1/3  [a] tokens/s: 10.0",
                                           "prompts 2/3  [b] tokens/s: 11.0"]


def test_progress_on_a_terminal_draws_a_bar_with_count_rate_and_eta():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    bar = StepBar(console, "prompts", 4, "prompt")
    bar.advance("[a] tokens/s: 10.0", keep=True)
    bar.close()
    text = out.getvalue()
    assert "[a] tokens/s: 10.0" in text
    assert "1/4" in text and "ETA" in text and "━" in text


def test_distill_progress_lines_name_the_phase(capsys):
    from specchat.commands.distill import DistillProgress

    shown = DistillProgress()
    shown.generated(0, 10)
    shown.generated(5, 10)
    shown.message("training")
    shown.done()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("teacher tokens 0/10") and lines[1].startswith("teacher tokens 5/10")
    assert lines[-1] == "training"


def test_loading_notes_stop_their_spinner_when_the_block_raises():
    """`pairs --check` and `bench` load under `loading_notes`: an error while a note runs
    stops rich's live display instead of leaving it drawing under the error message."""
    from specchat.commands.progress import loading_notes

    console = Console(file=io.StringIO(), force_terminal=True, width=120, color_system=None)
    with pytest.raises(RuntimeError), loading_notes(console) as notes:
        notes("loading the target")
        progress = notes.current.progress
        assert progress.live.is_started
        raise RuntimeError("the load failed")
    assert notes.current is None and not progress.live.is_started
