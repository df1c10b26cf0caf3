"""Command-line options shared by run, chat and bench, and applying them to a pair.

Range checks reuse the config module's, so a bad value reads the same whether it
came from models.toml or the command line.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from specchat.errors import UsageError
from specchat.models.config.pairs import BACKENDS, DTYPES, PairConfig, decoding_problem


def pair_option(function):
    return click.option("--pair", "pair_name", metavar="NAME",
                        help="Pair from models.toml (default: the file's `default`).")(function)


class DraftLength(click.ParamType):
    """-k: a whole number of draft tokens, or "auto" for the adaptive policy."""

    name = "N|auto"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value == "auto":
            return value
        try:
            return int(value)
        except ValueError:
            self.fail(f"{value!r} is neither a whole number nor 'auto'", param, ctx)


def k_option(function):
    return click.option("-k", "k", type=DraftLength(), default=None, metavar="N|auto",
                        help="Draft tokens per round (0 = target only, auto = adaptive).")(function)


def temperature_option(function):
    return click.option("--temperature", type=float, default=None, metavar="T",
                        help="0 is greedy and lossless-exact; >0 samples.")(function)


def dtype_option(function):
    return click.option("--dtype", type=click.Choice(DTYPES), default=None,
                        help="Override the pair's dtype.")(function)


def backend_option(function):
    return click.option("--backend", type=click.Choice(BACKENDS), default=None,
                        help="Override the pair's backend (auto: llama.cpp for a GGUF target "
                             "on the CPU when llama-cpp-python is installed).")(function)


def apply_overrides(pair: PairConfig, k: int | None = None, temperature: float | None = None,
                    top_p: float | None = None, top_k: int | None = None,
                    backend: str | None = None) -> PairConfig:
    """The pair with command-line values in place of its own, range-checked."""
    problem = decoding_problem(k, temperature, top_p, top_k)
    if problem:
        raise UsageError(problem)
    changes = {name: value for name, value in
               (("k", k), ("temperature", temperature), ("top_p", top_p), ("top_k", top_k),
                ("backend", backend))
               if value is not None}
    return dataclasses.replace(pair, **changes)


def load_pair_config(config: Path | None, name: str | None) -> PairConfig:
    from specchat.models.config.pairs import load_catalog

    return load_catalog(config).get(name)
