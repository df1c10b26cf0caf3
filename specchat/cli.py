"""The `specchat` command line: a click group that builds things and hands them over.

Heavy imports (torch, transformers, textual) happen inside the commands, so
`specchat --help` stays fast. Every `SpecchatError` becomes a one-line message and
exit status 2; a traceback means a bug of ours, not a mistake of the user's.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import click

from specchat import __version__
from specchat.commands.options import (config_from, config_option, k_option, pair_option,
                                       theme_option)
from specchat.errors import SpecchatError

CONTEXT = {"help_option_names": ["-h", "--help"]}


log = logging.getLogger("specchat.cli")


class Group(click.Group):
    """Runs `chat` when no command is given; turns user errors into one line; logs both
    kinds of error (a traceback in the log file for ours). click's own ends (--help, a
    bad option, Ctrl-C at a prompt) are click's to show: a usage error is logged as its
    message, the rest not at all."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort):
            raise
        except click.ClickException as error:
            log.info("usage error shown to the user: %s", error.format_message())
            raise
        except SpecchatError as error:
            log.error("error shown to the user: %s", error)
            click.echo(f"specchat: error: {error}", err=True)
            ctx.exit(2)
        except KeyboardInterrupt:
            click.echo("specchat: interrupted", err=True)
            ctx.exit(130)
        except Exception:
            log.exception("unexpected error")
            raise


@click.group(cls=Group, invoke_without_command=True, context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="specchat")
@config_option
@pair_option
@theme_option
@k_option
@click.pass_context
def main(ctx: click.Context, config_file: Path | None, pair_name: str | None,
         theme: str | None, k: int | str | None) -> None:
    """specchat: watch speculative decoding happen, token by token.

    With no command, opens the chat (on --pair, else the default pair).
    """
    from specchat.logs import start_logging

    start_logging()
    ctx.ensure_object(dict)
    ctx.obj["config"] = config_file
    chat_options = {"pair_name": pair_name, "theme": theme, "k": k}
    if ctx.invoked_subcommand is None:
        ctx.invoke(command_named(ctx, "chat"), **chat_options)
    elif any(value is not None for value in chat_options.values()):
        given = [flag for flag, value in zip(("--pair", "--theme", "-k"), chat_options.values())
                 if value is not None]
        raise click.UsageError(misplaced_options_hint(ctx, ctx.invoked_subcommand, given))


def command_named(ctx: click.Context, name: str) -> click.Command:
    """One of the group's commands (every name asked for here is one of them)."""
    command = main.get_command(ctx, name)
    if command is None:
        raise click.UsageError(f"no such command: {name}")
    return command


def misplaced_options_hint(ctx: click.Context, command: str, given: list[str]) -> str:
    """Where chat options given before another command go: after it where it takes them,
    else the commands that do."""
    def flags(name: str) -> set[str]:
        return {opt for param in command_named(ctx, name).params for opt in param.opts}

    def both(items: list[str]) -> str:
        return " and ".join(items)

    one = len(given) == 1
    opening = f"{both(given)} before a command open{'s' if one else ''} the chat"
    missing = [flag for flag in given if flag not in flags(command)]
    if not missing:
        return (f"{opening}; give {'it' if one else 'them'} after the command: "
                f"specchat {command} {given[0]} ...")
    takers = sorted(name for name in main.list_commands(ctx) if set(missing) <= flags(name))
    it = "it" if len(missing) == 1 else "them"
    return (f"{opening}, and `specchat {command}` has no {both(missing)}: open the chat with "
            f"`specchat {given[0]} ...` alone, or give {it} to a command that takes {it} "
            f"({', '.join(takers)})")


@main.command(context_settings=CONTEXT)
@config_option
@click.option("--check", "check_name", metavar="NAME",
              help="For pair NAME on this machine: memory per model, step costs, and whether "
                   "speculation should pay.")
@click.option("--suggest", "suggest_target", metavar="TARGET",
              help="Which models on this machine (models.toml, built-ins, ollama, the Hugging "
                   "Face cache, LM Studio) could draft for TARGET (a model reference or a "
                   "pair), best bets first. Never downloads.")
@click.option("--measure", is_flag=True,
              help="With --check: load the pair and time its steps instead of predicting them. "
                   "With --suggest: load the first candidates (--top) and measure α and c.")
@click.option("--top", type=click.IntRange(min=1), default=3, show_default=True,
              help="With --suggest --measure: how many candidates to measure.")
@click.option("--write", "write_name", metavar="NAME",
              help="With --suggest: add a candidate (--pick) to your models.toml as pair NAME.")
@click.option("--pick", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --suggest --write: the candidate's row.")
@click.option("--json", "as_json", is_flag=True,
              help="The list as JSON: every pair with its keys and each model's availability "
                   "(with --suggest: the candidates).")
@click.pass_context
def pairs(ctx: click.Context, config_file: Path | None, check_name: str | None,
          suggest_target: str | None, measure: bool, top: int, write_name: str | None,
          pick: int, as_json: bool) -> None:
    """List the pairs in models.toml and whether each model is available offline."""
    from specchat.commands.pair_list import pair_lines, pair_records
    from specchat.models.config.pairs import load_catalog

    catalog = load_catalog(config_from(ctx, config_file))
    if suggest_target is not None:
        suggest_pairs(catalog, suggest_target, measure, top, write_name, pick, as_json)
        return
    if check_name is not None:
        from specchat.commands.advice import check_lines
        from specchat.commands.progress import loading_notes

        with loading_notes() as notes:
            lines = check_lines(catalog.get(check_name), measure, notes)
        for line in lines:
            click.echo(line)
        return
    records = pair_records(catalog)
    if as_json:
        click.echo(json.dumps(records, ensure_ascii=False, indent=2))
        return
    for line in pair_lines(records):
        click.echo(line)


def suggest_pairs(catalog, target: str, measure: bool, top: int, write_name: str | None,
                  pick: int, as_json: bool) -> None:
    """`pairs --suggest`: the candidates (commands/suggest.py), measured or written as asked."""
    from specchat.commands.progress import loading_notes
    from specchat.commands.suggest import pair_name_for, suggest, suggestion_lines, write_pair

    result = suggest(target, catalog)
    if measure:
        from specchat.commands.suggest_measure import measure as measure_candidates

        with loading_notes() as notes:
            measure_candidates(result, top, notes)
    if write_name is not None:
        file = write_pair(result, write_name, pick)
        click.echo(f"added pair '{write_name}' to {file}: specchat chat --pair {write_name}")
        return
    if as_json:
        click.echo(json.dumps(result.as_dict(), ensure_ascii=False, indent=2))
        return
    first = result.candidates[0].card if result.candidates else None
    for line in suggestion_lines(result, target, pair_name_for(result.target, first)):
        click.echo(line)


@main.command(context_settings=CONTEXT)
@click.argument("what", type=click.Choice(["config", "data", "themes", "cache", "logs"]))
@config_option
def locate(what: str, config_file: Path | None) -> None:
    """Print the folder where specchat keeps its config (models.toml, keymap.toml,
    tui.json), data (history), themes or model cache, or its log file (attach it to a bug
    report)."""
    from specchat import paths
    from specchat.logs import log_file

    place = {"config": paths.config_dir, "data": paths.data_dir,
             "themes": paths.user_themes_dir, "cache": paths.cache_dir, "logs": log_file}[what]()
    click.echo(str(place))


def _register_commands() -> None:
    from specchat.commands.bench import bench
    from specchat.commands.chat import chat
    from specchat.commands.distill import distill
    from specchat.commands.export_gguf import export_gguf
    from specchat.commands.history import history
    from specchat.commands.serve import serve
    from specchat.commands.run import run

    main.add_command(run)
    main.add_command(chat)
    main.add_command(bench)
    main.add_command(distill)
    main.add_command(export_gguf)
    main.add_command(history)
    main.add_command(serve)


_register_commands()

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
