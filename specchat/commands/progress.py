"""Progress of the long headless commands (bench, model loading and conversion,
distill) on stderr, through rich: a bar with rate and ETA when stderr is a
terminal, one plain line per update otherwise (logs, pipes, CI).

Callers say what is done out of what total and add a short text; notes (a line
of their own) print above a running bar. Knows nothing about models or timing
of its own beyond what rich measures.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn,
                           SpinnerColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn)
from rich.text import Text



class RateColumn(ProgressColumn):
    """Completed units per second, as rich measures them over recent updates."""

    def __init__(self, unit: str):
        super().__init__()
        self.unit = unit

    def render(self, task: Any) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:.2f} {self.unit}/s", style="progress.data.speed")


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


class StepBar:
    """One task counted in steps: `update(done, text)`; a bar or plain lines."""

    def __init__(self, console: Console, description: str, total: int | None,
                 unit: str | None = None, start: int = 0):
        """`unit` names the rate column (none without it); `start` is work already done."""
        self.console = console
        self.description = description
        self.total = total
        self.done = start
        self.progress: Progress | None = None
        if console.is_terminal:
            self.progress = Progress(*columns(unit, total), console=console, transient=False)
            self.task = self.progress.add_task(description, total=total, completed=start, info="")
            self.progress.start()

    def advance(self, text: str = "", keep: bool = False) -> None:
        """One more step done; with `keep`, a bar also leaves `text` as a line of its own."""
        if keep and self.progress is not None:
            self.note(text)
            text = ""
        self.update(self.done + 1, text)

    def update(self, done: int, text: str = "") -> None:
        self.done = done
        if self.progress is not None:
            self.progress.update(self.task, completed=done, info=text)
        else:
            of = f"/{self.total}" if self.total else ""
            self.console.print(f"{self.description} {done}{of}  {text}".rstrip(), soft_wrap=True,
                               markup=False)

    def note(self, text: str) -> None:
        """A line of its own, printed above the bar while it runs."""
        self.console.print(text, soft_wrap=True, markup=False)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def columns(unit: str | None, total: int | None) -> list[ProgressColumn]:
    if total is None:  # no count known: a spinner and the time so far
        return [SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                TextColumn("{task.fields[info]}", markup=False)]
    rate = [RateColumn(unit)] if unit else []
    return [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), *rate,
            TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[info]}", markup=False)]


class LoadingNotes:
    """Loading notes (`progress(note)` of the model loader): on a terminal each note runs
    as a spinner with its elapsed time until the next one (a step's `Milestone` end is a
    line of its own); plain lines otherwise."""

    def __init__(self, console: Console | None = None, prefix: str = ""):
        self.console = console or stderr_console()
        self.prefix = prefix
        self.current: StepBar | None = None

    def __call__(self, note: str) -> None:
        from specchat.models.config.part_wheels import Milestone

        self.close()
        if self.console.is_terminal and not (isinstance(note, Milestone) and note.done):
            self.current = StepBar(self.console, self.prefix + note, None)
        else:
            self.console.print(self.prefix + note, soft_wrap=True, markup=False)

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
            self.current = None


@contextmanager
def loading_notes(console: Console | None = None, prefix: str = "") -> Iterator[LoadingNotes]:
    """`LoadingNotes` for a block, its spinner stopped however the block ends (an error that
    skipped `close` left rich's live display running under the error message)."""
    notes = LoadingNotes(console, prefix)
    try:
        yield notes
    finally:
        notes.close()
