"""`specchat run`: one answer streamed to stdout, statistics on stderr.

Coloured by token kind when stdout is a terminal, plain text otherwise; with
--jsonl, one JSON object per verify round and a final `done` object (schema in
the README). The prompt is the arguments, or stdin (`-`, or no argument while stdin is
not a terminal), decoded as UTF-8 with U+FFFD for bytes that are not. Ctrl-C (or SIGTERM)
stops the answer within one round: the text so far stays on stdout, the statistics (or the
`done` object, stop_reason "stopped") follow, and the exit status is 130 (143); a second
one ends it at once. Model text is untrusted: the coloured and the plain output show its
control characters visibly (specchat/control_chars.py); `--jsonl` keeps the exact text,
escaped.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import click

from specchat.commands.options import (apply_overrides, argument_text, backend_option,
                                       config_from, config_option, decoded, dtype_option,
                                       k_option, load_pair_config,
                                       max_new_tokens_option, pair_option, system_option,
                                       temperature_option, top_k_option, top_p_option)
from specchat.control_chars import json_text, visible
from specchat.errors import SpecchatError, UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from specchat.chat.events import AnswerDone, StatsSnapshot, TokenSpan
    from specchat.models.loader import LoadedPair


class AnswerFailed(SpecchatError):
    """A round ran out of GPU memory or context; what was answered before is printed."""


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@pair_option
@click.option("--no-spec", is_flag=True, help="Decode with the target alone (k = 0).")
@k_option
@temperature_option
@top_p_option
@top_k_option
@click.option("--seed", type=int, default=None,
              help="Seed for sampling (default: drawn from the OS; the stats block prints it).")
@max_new_tokens_option(256)
@dtype_option
@backend_option
@system_option
@click.option("--jsonl", is_flag=True, help="One JSON object per round, then a `done` object.")
@config_option
@click.argument("prompt", nargs=-1)
@click.pass_context
def run(ctx: click.Context, pair_name: str | None, no_spec: bool, k: int | str | None,
        temperature: float | None, top_p: float | None, top_k: int | None, seed: int | None,
        max_new_tokens: int, dtype: str | None, backend: str | None, system: str | None,
        jsonl: bool, config_file: Path | None, prompt: tuple[str, ...]):
    """Answer PROMPT once (- or no PROMPT with piped input: read it from stdin)."""
    text = read_prompt(prompt)
    pair_config = apply_overrides(load_pair_config(config_from(ctx, config_file), pair_name), k,
                                  temperature, top_p, top_k, backend)
    from specchat.chat.session import ChatSession
    from specchat.models.loader import load_pair

    notes = progress_printer()
    try:
        pair = load_pair(pair_config, dtype=dtype, progress=notes)
        session = ChatSession(pair, system=system, seed=seed)
        session.speculate = not no_spec
        if session.speculate and session.settings.k_policy is not None:
            session.start_auto(notes)
    finally:
        notes.close()
    printer = JsonlPrinter(session) if jsonl else TextPrinter(stdout_console())
    failed = ""
    with Interrupt() as interrupt:
        for event in session.answer(text, max_new_tokens=max_new_tokens, should_stop=interrupt):
            printer.handle(event)
            failed = getattr(event, "error", "")
    printer.finish(pair, session)
    if failed:  # the answer so far is printed; the failure is the exit status
        raise AnswerFailed(f"the answer ended early: {failed}")
    if interrupt.requested:
        click.echo(f"specchat: {interrupt.said()}: the answer so far is above", err=True)
        ctx.exit(interrupt.status)


class Interrupt:
    """Ctrl-C or SIGTERM while the answer streams: the first stops it within a round (what was
    answered stays, the statistics or the `done` object follow, and the exit status is 128 +
    the signal's number: 130 or 143); a second one ends the program at once."""

    SIGNALS: dict[int, str] = {signal.SIGINT: "interrupted",
                               signal.SIGTERM: "terminated (SIGTERM)"}

    def __init__(self):
        self.signum: int | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> "Interrupt":
        self.previous = {signum: signal.signal(signum, self._handle) for signum in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt
        else:
            raise SystemExit(128 + signum)

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def status(self) -> int:
        """The exit status a shell reports for the signal: 130 (Ctrl-C), 143 (SIGTERM)."""
        return 128 + (self.signum or 0)

    def said(self) -> str:
        """What the last stderr line says happened: "interrupted", "terminated (SIGTERM)"."""
        return self.SIGNALS[self.signum if self.signum is not None else signal.SIGINT]

    def __call__(self) -> bool:
        return self.requested


class Quiet:
    """Loading notes where stderr is not a terminal: only the milestones of long first-use
    steps (joining a built-in model's part wheels), one plain line each."""

    def __call__(self, note: str) -> None:
        from specchat.models.config.part_wheels import Milestone

        if isinstance(note, Milestone):
            click.echo(f"specchat: {note}", err=True)

    def close(self) -> None:
        pass


def progress_printer():
    """Loading notes on stderr (a spinner with the time each step takes) for a person
    watching a terminal; otherwise only the milestones of long first-use steps."""
    from specchat.commands.progress import LoadingNotes, stderr_console

    console = stderr_console()
    return LoadingNotes(console, "specchat: ") if console.is_terminal else Quiet()


def stdout_console():
    from rich.console import Console

    return Console(file=sys.stdout, highlight=False)


def read_prompt(words: tuple[str, ...]) -> str:
    """The arguments, or stdin for `-` (or for no argument when stdin is not a terminal)."""
    text = argument_text(" ".join(words), "the prompt")
    if text == "-" or (not words and not sys.stdin.isatty()):
        text = stdin_text()
    elif not words:
        raise UsageError("no prompt: pass it as an argument, or pipe it on stdin "
                         "(echo hi | specchat run)")
    if not text.strip():
        raise UsageError("the prompt is empty: pass it as an argument, or - to read stdin")
    return text


def stdin_text() -> str:
    """stdin as UTF-8; bytes that are not become U+FFFD, and stderr says how many."""
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    return decoded(data, "stdin")


class TextPrinter:
    """Streams the answer's text; coloured by kind on a terminal (as far as it can)."""

    def __init__(self, console: Console):
        self.console = console
        self.colour = console.is_terminal
        self.colours = token_colours() if self.colour else {}
        self.done: AnswerDone | None = None

    def handle(self, event: Any) -> None:
        from specchat.chat.events import AnswerDone, ContextTrimmed, RoundUpdate

        if isinstance(event, RoundUpdate):
            self.write(event.spans)
        elif isinstance(event, ContextTrimmed):
            click.echo(f"[dropped {event.dropped_exchanges} oldest exchange(s) to fit the context]",
                       err=True)
        elif isinstance(event, AnswerDone):
            self.done = event

    def write(self, spans: Sequence[TokenSpan]) -> None:
        from rich.text import Text

        from specchat.commands.render import paint

        if self.colour:
            text = Text.assemble(*(paint(s, self.colours) for s in spans))
            self.console.print(text, end="", soft_wrap=True)
        else:
            sys.stdout.write(visible("".join(s.text for s in spans if s.kind != "rejected")))
        self.console.file.flush()

    def finish(self, pair: LoadedPair, session: Any) -> None:
        from specchat.commands.render import stats_block

        sys.stdout.write("\n")
        sys.stdout.flush()
        if self.done is None:
            return
        speculative = session.speculate and pair.has_draft
        mode = f"speculative, k={k_text(session, self.done.stats)}" if speculative else "target only"
        header = [("pair", pair.config.name), ("mode", mode),
                  ("seed", str(getattr(session, "seed", None))),
                  ("device / dtype", f"{pair.device_label} / {pair.dtype} ({pair.reasons['dtype']})"),
                  *backend_rows(pair),
                  ("load time", f"{pair.load_s:.2f} s")] + memory_rows(pair)
        click.echo(stats_block(self.done.stats, self.done.stop_reason, header), err=True)


def k_text(session: Any, stats: StatsSnapshot) -> str:
    """The fixed k, or "auto" with the k most rounds used."""
    if session.settings.k_policy is None:
        return str(session.settings.k)
    return f"auto (mostly {stats.k_in_use})" if stats.k_in_use else "auto"


def backend_rows(pair: LoadedPair) -> list[tuple[str, str]]:
    """What computes each model's logits, and why the target's backend was chosen."""
    rows = [("target backend", f"{pair.backends['target']} ({pair.reasons['backend']})")]
    if "draft" in pair.backends:
        rows.append(("draft backend", pair.backends["draft"]))
    if getattr(pair, "draft_tokenizer", None) is not None:
        rows.append(("draft tokenizer", CROSS_TOKENIZER))
    return rows


CROSS_TOKENIZER = ("its own: its text is re-tokenized for the target (greedy: string match; "
                   "sampling: shared tokens); counts are in target tokens")


class JsonlPrinter:
    """One object per verify round, then `done` (README: "JSON lines")."""

    def __init__(self, session: Any):
        self.session = session
        self.done: dict | None = None

    def handle(self, event: Any) -> None:
        from specchat.chat.events import AnswerDone, ContextTrimmed, RoundUpdate

        if isinstance(event, RoundUpdate):
            emit(round_object(event))
        elif isinstance(event, ContextTrimmed):
            emit({"type": "context_trimmed", "dropped_exchanges": event.dropped_exchanges})
        elif isinstance(event, AnswerDone):
            self.done = {"type": "done", "text": event.text, "stop_reason": event.stop_reason,
                         "seed": getattr(self.session, "seed", None),
                         "stats": event.stats.as_dict()}
            if event.error:
                self.done["error"] = event.error

    def finish(self, pair: LoadedPair, session: Any) -> None:
        if self.done is not None:
            memory = pair.memory() if hasattr(pair, "memory") else None
            if memory is not None:
                self.done["memory"] = dataclasses.asdict(memory)
            emit(self.done)


def memory_rows(pair: LoadedPair) -> list[tuple[str, str]]:
    """Placement and memory lines of the stats block (weights, KV cache, CUDA peak)."""
    rows = [("placement", pair.placement)] if getattr(pair, "placement", "") else []
    return rows + (pair.memory().rows() if hasattr(pair, "memory") else [])


def round_object(event: Any) -> dict:
    token = event.token
    return {"type": "round",
            "accepted": [s.token_id for s in event.accepted],
            "accepted_text": "".join(s.text for s in event.accepted),
            "rejected": [s.token_id for s in event.rejected],
            "rejected_text": "".join(s.text for s in event.rejected),
            "token": None if token is None else token.token_id,
            "token_text": "" if token is None else token.text,
            "token_kind": None if token is None else token.kind,
            "draft_ms": round(event.draft_ms, 3), "verify_ms": round(event.verify_ms, 3),
            **alignment_field(event)}


def alignment_field(event: Any) -> dict:
    """A cross-tokenizer draft's rounds: how each draft (accepted, then rejected) lines up
    with the draft model's own tokens; nothing for a draft of the target's tokenizer."""
    drafts = event.accepted + event.rejected
    if not any(s.alignment for s in drafts):
        return {}
    return {"alignment": [s.alignment for s in drafts]}


def emit(obj: dict) -> None:
    sys.stdout.write(json_text(obj) + "\n")
    sys.stdout.flush()


def token_colours() -> dict[str, str]:
    """The default theme's token colours as rich names, the theme files checked by the chat's
    own rules (a file the chat skips is skipped here too, and named on stderr)."""
    from specchat.theme_files import DEFAULT_THEME, DEFAULT_TOKEN_COLOURS, load_themes
    from specchat.token_kinds import TOKEN_KINDS
    from specchat.tui.theme_rules import TextualRules, rich_colour

    themes, problems = load_themes(TextualRules())
    for problem in problems:
        click.echo(f"specchat: {problem}", err=True)
    default = themes.get(DEFAULT_THEME)
    variables = default.variables if default else DEFAULT_TOKEN_COLOURS
    return {kind: rich_colour(variables[f"spec-{kind}"]) if f"spec-{kind}" in variables else "default"
            for kind in TOKEN_KINDS}
