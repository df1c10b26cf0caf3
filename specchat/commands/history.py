"""`specchat history`: the saved conversations from the command line, like `llm logs`.

`history` (or `history list`) lists the newest conversations, `history show ID` prints
one as Markdown (or JSON), `history export ID` writes Markdown, JSON or the coloured
HTML page to a file or stdout (into a folder that exists: a missing one is refused, never
created). `ID` may be `last`. The history file is opened the way the chat opens it
(history/store.py), so a newer specchat's file or a folder that cannot be read is one line
naming the file; nothing here writes to the file. Saved text is untrusted: what reaches a
terminal or a text file shows its control characters (specchat/control_chars.py); JSON
keeps them, escaped.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from specchat.commands.options import check_output_file
from specchat.control_chars import json_text, visible
from specchat.errors import UsageError

if TYPE_CHECKING:
    from specchat.history.store import HistoryStore, SavedConversation

CONTEXT = {"help_option_names": ["-h", "--help"]}
FORMATS = ("markdown", "json", "html")
SUFFIX_FORMATS = {".md": "markdown", ".markdown": "markdown", ".json": "json", ".html": "html",
                  ".htm": "html"}

history_file_option = click.option(
    "--history-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
    help="The history database (default: history.sqlite3 in `specchat locate data`).")


@click.group("history", invoke_without_command=True, context_settings=CONTEXT)
@history_file_option
@click.option("-n", "--count", type=click.IntRange(min=1), default=20, show_default=True,
              help="How many conversations to list, newest first.")
@click.option("--json", "as_json", is_flag=True, help="List as JSON.")
@click.pass_context
def history(ctx: click.Context, history_file: Path | None, count: int, as_json: bool) -> None:
    """List, show and export saved conversations (`history` alone lists them)."""
    ctx.ensure_object(dict)
    ctx.obj["history_file"] = history_file
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_command, history_file=history_file, count=count, as_json=as_json)


@history.command("list", context_settings=CONTEXT)
@history_file_option
@click.option("-n", "--count", type=click.IntRange(min=1), default=20, show_default=True,
              help="How many conversations to list, newest first.")
@click.option("--json", "as_json", is_flag=True, help="List as JSON.")
@click.pass_context
def list_command(ctx: click.Context, history_file: Path | None, count: int,
                 as_json: bool) -> None:
    """The newest conversations: id, last change, pair, turns and title."""
    store = open_store(history_file or _group_file(ctx))
    try:
        rows = [listing(c, store.turn_counts(c.id)) for c in store.list_conversations(count)]
    finally:
        store.close()
    if as_json:
        click.echo(json_text(rows, indent=2))
        return
    if not rows:
        click.echo(f"no conversations yet in {store.path}")
    for row in rows:
        click.echo(listing_line(row))


@history.command(context_settings=CONTEXT)
@click.argument("conversation", metavar="ID|last", default="last")
@history_file_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON, every token with its kind.")
@click.pass_context
def show(ctx: click.Context, conversation: str, history_file: Path | None,
         as_json: bool) -> None:
    """Print a conversation as Markdown (rejected drafts never appear in its text)."""
    click.echo(render(load(conversation, history_file or _group_file(ctx)),
                      "json" if as_json else "markdown", None), nl=False)


@history.command(context_settings=CONTEXT)
@click.argument("conversation", metavar="ID|last", default="last")
@history_file_option
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Default: from the output's suffix (.md, .json, .html), else markdown.")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write here instead of stdout.")
@click.option("--theme", default=None, metavar="NAME",
              help="The HTML page's colours: specchat's or Textual's theme (default: "
                   "specchat-dark).")
@click.pass_context
def export(ctx: click.Context, conversation: str, history_file: Path | None, fmt: str | None,
           output: Path | None, theme: str | None) -> None:
    """Export a conversation as Markdown, JSON, or an HTML page with every token in its
    fate's colour."""
    fmt = fmt or SUFFIX_FORMATS.get(output.suffix.lower() if output else "", "markdown")
    if output is not None:
        check_output_file("-o", output)
    text = render(load(conversation, history_file or _group_file(ctx)), fmt, theme)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"cannot write {output}: {error.strerror or error}") from None
    click.echo(f"wrote {output} ({fmt})", err=True)


def _group_file(ctx: click.Context) -> Path | None:
    return (ctx.obj or {}).get("history_file")


def open_store(path: Path | None) -> HistoryStore:
    """The history store, read the way the chat reads it; one-line errors naming the file."""
    import sqlite3

    from specchat.history.store import HistoryStore, NewerHistory, default_path

    path = path or default_path()
    if not path.exists():
        raise UsageError(f"no history file at {path}: chat first (`specchat`), or name one "
                         "with --history-file")
    try:
        return HistoryStore(path)
    except NewerHistory as error:
        raise UsageError(f"history file {path}: {error}; upgrade specchat to read it") from None
    except (sqlite3.Error, OSError) as error:
        raise UsageError(f"history file {path} cannot be read ({error}); the chat moves an "
                         "unreadable file aside when it opens it") from None


def load(conversation: str, path: Path | None) -> SavedConversation:
    """The saved conversation with this id (or the newest, for `last`)."""
    store = open_store(path)
    try:
        wanted = conversation_id(conversation, store)
        try:
            return store.load(wanted)
        except KeyError:
            raise UsageError(f"no conversation {wanted} in {store.path}: "
                             "`specchat history` lists them") from None
    finally:
        store.close()


def conversation_id(text: str, store: HistoryStore) -> int:
    if text == "last":
        newest = store.list_conversations(1)
        if not newest:
            raise UsageError(f"no conversations yet in {store.path}")
        return newest[0].id
    if not text.isdigit():
        raise UsageError(f"conversation id must be a number or 'last', got {text!r}: "
                         "`specchat history` lists them")
    return int(text)


def render(conversation: SavedConversation, fmt: str, theme: str | None) -> str:
    from specchat.history import export as formats

    if fmt == "json":
        return formats.to_json(conversation)
    if fmt == "markdown":
        return formats.to_markdown(conversation)
    from specchat.tui.themes import named_theme, theme_page_colours

    return formats.to_html(conversation, theme_page_colours(named_theme(theme)))


def listing(conversation: SavedConversation, counts: dict[str, int]) -> dict:
    """The JSON of one listed conversation; `counts`: its turns by role."""
    return {"id": conversation.id, "title": conversation.title, "pair": conversation.pair,
            "created": conversation.created, "updated": conversation.updated,
            "turns": sum(counts.values()), "answers": counts.get("assistant", 0)}


def listing_line(row: dict) -> str:
    when = datetime.fromtimestamp(row["updated"]).strftime("%Y-%m-%d %H:%M")
    return visible(f"{row['id']:>5}  {when}  {row['pair'] or '?':<22} {row['answers']:>3} answers  "
                   f"{row['title']}")
