"""Command-line options shared by run, chat and bench, and applying them to a pair.

Range checks are the click types `WholeNumber` and `RealNumber` over engine/params.py's
bounds (those models/config/pairs.py checks models.toml's keys against), so a bad value
reads the same whether it came from models.toml or the command line, names the flag and the
allowed range, and is refused before anything runs. Text the user hands over (the
prompt, --system, stdin) is made valid UTF-8 here: bytes that are not become U+FFFD, and
stderr says so before anything loads. A file a command writes (`--html`, `--out`, `-o`)
goes into a folder that exists: `check_output_file` refuses a missing one (never created).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Callable

import click

from specchat.engine.params import (DRAFT_LENGTH, MAX_NEW_TOKENS, TEMPERATURE, TOP_K, TOP_P, Bound,
                                    RealBound)
from specchat.errors import UsageError
from specchat.models.config.pairs import BACKENDS, DTYPES, PairConfig



def check_output_file(flag: str, path: Path) -> None:
    """A file a command will write: its folder must exist (a mistyped path is refused, not
    created) and the path must not be a folder; one line naming the flag and the folder."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: folder {folder} does not exist: create it first, "
                         "or write somewhere else")
    if path.exists() and not path.is_file():
        raise UsageError(f"{flag} {path} is not a file")


def decoded(data: bytes, what: str) -> str:
    """Bytes as UTF-8 text: those that are not become U+FFFD, and stderr says how many."""
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - data.decode("utf-8", errors="ignore").count("\ufffd")
    if bad:
        click.echo(f"specchat: {what} is not valid UTF-8: {bad} invalid byte sequence(s) read as "
                   "U+FFFD", err=True)
    return text


def argument_text(text: str, what: str) -> str:
    """A command-line text as valid UTF-8: Python keeps argument bytes that are not UTF-8 as
    lone surrogates, which no tokenizer takes; they become U+FFFD (said on stderr)."""
    if not any("\udc80" <= char <= "\udcff" for char in text):
        return text
    try:
        return decoded(os.fsencode(text), what)
    except UnicodeEncodeError:  # surrogates that were no bytes of the user's
        return decoded(text.encode("utf-8", errors="replace"), what)


def system_option(function: Callable):
    return click.option("--system", default=None, help="System prompt.",
                        callback=lambda ctx, param, value: None if value is None
                        else argument_text(value, "--system"))(function)


def pair_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of --pair: the catalog's pair names (none where it cannot load)."""
    from specchat.errors import SpecchatError
    from specchat.models.config.pairs import load_catalog

    try:
        names = load_catalog((ctx.find_root().params or {}).get("config_file")).pairs
    except SpecchatError:
        return []
    return [name for name in names if name.startswith(incomplete)]


config_option = click.option(
    "--config", "config_file", type=click.Path(path_type=Path, dir_okay=False),
    help="A models.toml whose pairs win over the user's and the built-in ones.")
"""--config, on the group and on every command that loads pairs (resolved by `config_from`)."""


def config_from(ctx: click.Context, config_file: Path | None) -> Path | None:
    """The models.toml a command reads: its own --config wins over the group's."""
    return config_file or (ctx.obj or {}).get("config")


def pair_option(function: Callable):
    return click.option("--pair", "pair_name", metavar="NAME", shell_complete=pair_names,
                        help="Pair from models.toml (default: the file's `default`).")(function)


def theme_option(function: Callable):
    return click.option("--theme", default=None, metavar="NAME",
                        help="Colour theme (default: the last one chosen; see "
                             "`specchat locate themes`).")(function)


class WholeNumber(click.ParamType):
    """A whole number within a `Bound` (or the bound's other word, such as "auto")."""

    name = "integer"

    def __init__(self, bound: Bound):
        self.bound = bound

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, str) and value != self.bound.also:
            value = int(value) if value.strip().lstrip("+-").isdigit() else value
        problem = self.bound.problem(value)
        if problem:
            self.fail(problem, param, ctx)
        return value


class RealNumber(click.ParamType):
    """A finite number within a `RealBound` (nan and inf are refused by name)."""

    name = "number"

    def __init__(self, bound: RealBound):
        self.bound = bound

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        problem = self.bound.problem(value)
        if problem:
            self.fail(problem, param, ctx)
        return value


def k_option(function: Callable):
    return click.option("-k", "k", type=WholeNumber(DRAFT_LENGTH), default=None, metavar="N|auto",
                        help=f"Draft tokens per round, {DRAFT_LENGTH.allowed()} "
                             "(0 = target only, auto = adaptive).")(function)


def top_k_option(function: Callable):
    return click.option("--top-k", type=WholeNumber(TOP_K), default=None, metavar="K",
                        help="Keep the K most likely tokens (0 keeps all).")(function)


def max_new_tokens_option(default: int):
    return click.option("--max-new-tokens", type=WholeNumber(MAX_NEW_TOKENS), default=default,
                        show_default=True, metavar="N",
                        help=f"Longest answer in tokens ({MAX_NEW_TOKENS.allowed()}).")


def temperature_option(function: Callable):
    return click.option("--temperature", type=RealNumber(TEMPERATURE), default=None, metavar="T",
                        help="0 is greedy and lossless-exact; >0 samples.")(function)


def dtype_option(function: Callable):
    return click.option("--dtype", type=click.Choice(DTYPES), default=None,
                        help="Override the pair's dtype.")(function)


def top_p_option(function: Callable):
    return click.option("--top-p", type=RealNumber(TOP_P), default=None, metavar="P",
                        help=f"Nucleus sampling: the probability mass kept ({TOP_P.allowed()}).")(function)


def backend_option(function: Callable):
    return click.option("--backend", type=click.Choice(BACKENDS), default=None,
                        help="Override the pair's backend (auto: for a GGUF target, int8 on a "
                             "CPU where fbgemm runs and the pair speculates, else llama.cpp "
                             "when installed, on the GPU where its build can offload).")(function)


def apply_overrides(pair: PairConfig, k: int | str | None = None, temperature: float | None = None,
                    top_p: float | None = None, top_k: int | None = None,
                    backend: str | None = None) -> PairConfig:
    """The pair with command-line values in place of its own (None: the pair's own). The
    values come range-checked by their click types (`WholeNumber`, `RealNumber`)."""
    sampling: dict[str, Any] = {
        name: value for name, value in
        (("temperature", temperature), ("top_p", top_p), ("top_k", top_k)) if value is not None}
    changes: dict[str, Any] = {name: value for name, value in (("k", k), ("backend", backend))
                               if value is not None}
    return dataclasses.replace(pair, sampling=dataclasses.replace(pair.sampling, **sampling),
                               **changes)


def load_pair_config(config: Path | None, name: str | None) -> PairConfig:
    from specchat.models.config.pairs import load_catalog

    return load_catalog(config).get(name)
