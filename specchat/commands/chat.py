"""`specchat chat` (and plain `specchat`): the Textual chat on a pair.

The composition root of the chat: builds a factory of conversation services
(chat/pair_service.py) over a loader of models (models/loader.py) and hands it to the
TUI, which never imports models; the model loads in a worker thread once the app is
on screen. Imports textual, never torch, before the app opens.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import click

from specchat.commands.options import (apply_overrides, backend_option, config_from,
                                       config_option, dtype_option, k_option,
                                       max_new_tokens_option, pair_option, system_option,
                                       temperature_option, theme_option)

if TYPE_CHECKING:
    from specchat.models.config.pairs import PairConfig


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@pair_option
@theme_option
@k_option
@temperature_option
@dtype_option
@backend_option
@system_option
@max_new_tokens_option(512)
@config_option
@click.option("--demo", "demo_rate", type=float, default=None, hidden=True,
              help="Use the scripted fake pair streaming at this many tokens/s (no model).")
@click.option("--served", is_flag=True, hidden=True,
              help="A tab of `specchat serve`: deleting a saved conversation asks first.")
@click.pass_context
def chat(ctx: click.Context, pair_name: str | None, theme: str | None, k: int | str | None,
         temperature: float | None, dtype: str | None, backend: str | None, system: str | None,
         max_new_tokens: int, config_file: Path | None, demo_rate: float | None, served: bool):
    """Open the chat: watch speculative decoding token by token."""
    if demo_rate is not None:
        app = build_demo_app(demo_rate, theme, system, served)
        app.run()
        leave(app.return_code or 0, app.history.unsaved_note())
        return
    from specchat.models.config.pairs import load_catalog
    from specchat.tui.themes import check_theme_name

    catalog = load_catalog(config_from(ctx, config_file))
    first = apply_overrides(catalog.get(pair_name), k, temperature, backend=backend)
    if theme is not None:
        check_theme_name(theme)
    app = build_app(catalog, first, theme, system, max_new_tokens, dtype, backend, served)
    app.run()
    leave(app.return_code or 0, app.history.unsaved_note())


def build_app(catalog: Any, first: PairConfig, theme: str | None, system: str | None,
              max_new_tokens: int, dtype: str | None, backend: str | None = None,
              served: bool = False):
    from specchat.tui.app import create_app

    def factory(name: str):
        config = first if name == first.name else apply_overrides(catalog.get(name),
                                                                  backend=backend)
        return pair_service(config, system, max_new_tokens, dtype)

    pairs = [(name, pair.description) for name, pair in catalog.pairs.items()]
    fixed_k = first.k if isinstance(first.k, int) else None  # "auto": the pair's own policy
    return create_app(factory, pairs, first.name, theme=theme, k=fixed_k,
                      temperature=first.sampling.temperature, system=system, served=served)


def pair_service(config: PairConfig, system: str | None, max_new_tokens: int, dtype: str | None):
    """The conversation service of one pair; its models load when the TUI's worker asks."""
    from specchat.chat.pair_service import PairService

    def load(override: str | None, progress: Callable[[str], None]):
        from specchat.models.device.cores import physical_cores
        from specchat.models.loader import load_pair

        return load_pair(config, dtype=override or dtype, progress=progress,
                         prefill_threads=config.threads or physical_cores(),
                         beside_screen=True)

    return PairService(config.name, load, system, max_new_tokens, config.description)


def build_demo_app(rate: float, theme: str | None, system: str | None, served: bool = False):
    from specchat.tui.app import create_app
    from specchat.chat.scripted import FakeConfig, ScriptedService

    def factory(name: str):
        return ScriptedService(FakeConfig(name=name, tokens_per_s=rate, load_s=1.0))

    pairs = [("demo", "scripted fake pair"), ("demo-2", "another scripted fake pair")]
    return create_app(factory, pairs, "demo", theme=theme, system=system, served=served)


def leave(code: int, note: str | None = None) -> None:
    """Exit at once: the terminal is restored and the history closed by now, and neither a
    model still loading in a worker thread (which cannot be interrupted) nor tearing down
    torch's modules should keep a user who quit waiting. `note`: where the conversation went
    that the history file could not take, said on stderr."""
    if note:
        click.echo(f"specchat: {note}", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

