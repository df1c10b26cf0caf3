"""`specchat run`: one answer streamed to stdout, statistics on stderr.

Coloured by token kind when stdout is a terminal, plain text otherwise; with
--jsonl, one JSON object per verify round and a final `done` object (schema in
the README).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from specchat.commands.options import (apply_overrides, backend_option, dtype_option, k_option,
                                       load_pair_config, pair_option, temperature_option)
from specchat.errors import UsageError


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@pair_option
@click.option("--no-spec", is_flag=True, help="Decode with the target alone (k = 0).")
@k_option
@temperature_option
@click.option("--top-p", type=float, default=None, metavar="P", help="Nucleus sampling in (0, 1].")
@click.option("--top-k", type=int, default=None, metavar="K", help="Keep the K most likely tokens.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for sampling.")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=256, show_default=True)
@dtype_option
@backend_option
@click.option("--system", default=None, help="System prompt.")
@click.option("--jsonl", is_flag=True, help="One JSON object per round, then a `done` object.")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("prompt", nargs=-1)
@click.pass_context
def run(ctx, pair_name, no_spec, k, temperature, top_p, top_k, seed, max_new_tokens, dtype,
        backend, system, jsonl, config_file, prompt):
    """Answer PROMPT once (use - to read it from stdin)."""
    text = read_prompt(prompt)
    config = config_file or (ctx.obj or {}).get("config")
    pair_config = apply_overrides(load_pair_config(config, pair_name), k, temperature, top_p, top_k,
                                  backend)
    from specchat.chat.session import ChatSession
    from specchat.models.loader import load_pair

    pair = load_pair(pair_config, dtype=dtype, progress=progress_printer())
    session = ChatSession(pair, system=system, seed=seed)
    session.speculate = not no_spec
    printer = JsonlPrinter() if jsonl else TextPrinter(sys.stdout.isatty())
    for event in session.answer(text, max_new_tokens=max_new_tokens):
        printer.handle(event)
    printer.finish(pair, session)


def progress_printer():
    """Loading notes on stderr for a person watching a terminal; silent otherwise."""
    if not sys.stderr.isatty():
        return lambda note: None
    return lambda note: click.echo(f"specchat: {note}", err=True)


def read_prompt(words: tuple[str, ...]) -> str:
    text = " ".join(words)
    if text == "-":
        text = sys.stdin.read()
    if not text.strip():
        raise UsageError("the prompt is empty: pass it as an argument, or - to read stdin")
    return text


class TextPrinter:
    """Streams the answer's text; coloured by kind on a terminal."""

    def __init__(self, colour: bool):
        self.colour = colour
        self.colours = token_colours() if colour else {}
        self.done = None

    def handle(self, event) -> None:
        from specchat.chat.events import AnswerDone, ContextTrimmed, RoundUpdate
        from specchat.commands.render import paint

        if isinstance(event, RoundUpdate):
            spans = event.spans if self.colour else [s for s in event.spans if s.kind != "rejected"]
            out = "".join(paint(s, self.colours) if self.colour else s.text for s in spans)
            sys.stdout.write(out)
            sys.stdout.flush()
        elif isinstance(event, ContextTrimmed):
            click.echo(f"[dropped {event.dropped_exchanges} oldest exchange(s) to fit the context]",
                       err=True)
        elif isinstance(event, AnswerDone):
            self.done = event

    def finish(self, pair, session) -> None:
        from specchat.commands.render import stats_block

        sys.stdout.write("\n")
        sys.stdout.flush()
        if self.done is None:
            return
        mode = "speculative" if session.speculate and pair.drafter else "target only"
        header = [("pair", pair.config.name), ("mode", f"{mode}, k={session.settings.k}"),
                  ("device / dtype", f"{pair.device} / {pair.dtype} ({pair.reasons['dtype']})"),
                  *backend_rows(pair),
                  ("load time", f"{pair.load_s:.2f} s")]
        click.echo(stats_block(self.done.stats, self.done.stop_reason, header), err=True)


def backend_rows(pair) -> list[tuple[str, str]]:
    """What computes each model's logits, and why the target's backend was chosen."""
    rows = [("target backend", f"{pair.backends['target']} ({pair.reasons['backend']})")]
    if "draft" in pair.backends:
        rows.append(("draft backend", pair.backends["draft"]))
    return rows


class JsonlPrinter:
    """One object per verify round, then `done` (README: "JSON lines")."""

    def handle(self, event) -> None:
        from specchat.chat.events import AnswerDone, ContextTrimmed, RoundUpdate

        if isinstance(event, RoundUpdate):
            emit(round_object(event))
        elif isinstance(event, ContextTrimmed):
            emit({"type": "context_trimmed", "dropped_exchanges": event.dropped_exchanges})
        elif isinstance(event, AnswerDone):
            emit({"type": "done", "text": event.text, "stop_reason": event.stop_reason,
                  "stats": event.stats.as_dict()})

    def finish(self, pair, session) -> None:
        pass


def round_object(event) -> dict:
    token = event.token
    return {"type": "round",
            "accepted": [s.token_id for s in event.accepted],
            "accepted_text": "".join(s.text for s in event.accepted),
            "rejected": [s.token_id for s in event.rejected],
            "rejected_text": "".join(s.text for s in event.rejected),
            "token": None if token is None else token.token_id,
            "token_text": "" if token is None else token.text,
            "token_kind": None if token is None else token.kind,
            "draft_ms": round(event.draft_ms, 3), "verify_ms": round(event.verify_ms, 3)}


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def token_colours() -> dict[str, str]:
    from specchat.chat.events import TOKEN_KINDS
    from specchat.theme_files import load_theme

    theme = load_theme()
    return {kind: theme.token_color(kind) for kind in TOKEN_KINDS}
