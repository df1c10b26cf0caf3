"""`specchat serve`: the live chat in a browser, for a projector or a shared screen.

textual-serve (the `serve` extra) runs `specchat chat` with Textual's web driver once per
browser tab and streams it to the page over a WebSocket; every tab is its own chat
process, with its own models. It binds to 127.0.0.1 unless --host says otherwise: whoever
reaches the page runs models on this machine. The pair and theme are checked here, before
the server starts, so a typo is one line instead of an error page in every tab. What URLs
the page names (never the bind address 0.0.0.0) is serve_address.py's, imported when
`serve` runs (it pulls in socket, which no other command needs at start-up); who may
drive the chat (the origin check, the token in the printed URL, --max-sessions) is
serve_guard.py's. Each tab's chat is told it is served (`--served`): deleting a saved
conversation there asks first.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from specchat.commands.options import (config_from, config_option, k_option, pair_option,
                                       theme_option)
from specchat.errors import UsageError


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@pair_option
@theme_option
@k_option
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but loopback lets others run models here.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--public-url", metavar="URL",
              help="The URL browsers open (behind a proxy or tunnel); by default each page "
                   "follows the address its browser used.")
@click.option("--no-token", is_flag=True,
              help="Serve without the secret token in the URL (a talk on a trusted network); "
                   "only the origin check is left.")
@click.option("--max-sessions", type=click.IntRange(min=1), default=2, show_default=True,
              metavar="N", help="Chats (tabs) that run at once; each loads the pair.")
@click.option("--demo", "demo_rate", type=float, default=None, metavar="TOKENS_PER_S",
              help="Serve the scripted demo pair at this pace (no model is loaded).")
@config_option
@click.pass_context
def serve(ctx: click.Context, pair_name: str | None, theme: str | None, k: int | str | None,
          host: str, port: int, public_url: str | None, no_token: bool, max_sessions: int,
          demo_rate: float | None, config_file: Path | None) -> None:
    """Serve the live chat to a browser (textual-serve): each tab is its own chat."""
    from specchat.commands.serve_address import (checked_public_url, http_url, origin_following,
                                                 reachable_host)
    from specchat.commands.serve_guard import guarded, make_gate

    config_file = config_from(ctx, config_file)
    check_choices(pair_name, theme, config_file, demo_rate)
    if public_url is not None:  # "" too: no URL a browser opens
        public_url = checked_public_url(public_url)
    server_class = textual_server()
    check_port(host, port)
    command = chat_command(pair_name, theme, k, config_file, demo_rate)
    open_url = public_url or http_url(reachable_host(host), port)
    gate = make_gate(not no_token, public_url, max_sessions, port)
    say_where(host, port, open_url, gate)
    if public_url is None:
        server_class = origin_following(server_class)
    server_class = guarded(server_class, gate)
    try:
        server_class(command, host=host, port=port, title="specchat",
                     public_url=open_url).serve()
    except OSError as error:
        raise UsageError(f"cannot listen on {host}:{port} ({error.strerror or error}): pick "
                         "another with --port or --host") from None


def say_where(host: str, port: int, open_url: str, gate) -> None:
    """The URL to open, with its token (on stderr), and a warning when others can reach it
    or when there is no token."""
    from specchat.commands.serve_address import LOOPBACK, WILDCARD, http_url

    loopback = "::1" if host == "::" else "127.0.0.1"
    here = (f"; on this machine {gate.page_url(http_url(loopback, port))}"
            if host in WILDCARD else "")
    click.echo(f"specchat: serving the chat: open {gate.page_url(open_url)}{here} "
               "(Ctrl+C stops)", err=True)
    if gate.token is None:
        click.echo("specchat: warning: --no-token: any program on this machine, and anyone who "
                   f"reaches {host}:{port}, can drive the chat and its saved conversations; "
                   "only pages of other sites are kept out", err=True)
    elif host not in LOOPBACK:
        click.echo(f"specchat: warning: listening on {host}: whoever has the URL above (its "
                   "token) runs models on this machine", err=True)


def check_choices(pair_name: str | None, theme: str | None, config_file: Path | None,
                  demo_rate: float | None) -> None:
    if demo_rate is not None and demo_rate <= 0:
        raise UsageError(f"--demo must be a pace above 0 tokens/s (got {demo_rate})")
    if demo_rate is None:
        from specchat.models.config.pairs import load_catalog

        load_catalog(config_file).get(pair_name)
    if theme is not None:
        from specchat.tui.themes import check_theme_name

        check_theme_name(theme)


def check_port(host: str, port: int) -> None:
    """The address can be listened on (said before textual-serve prints its banner)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(infos[0][4])
    except OSError as error:
        raise UsageError(f"cannot listen on {host}:{port} ({error.strerror or error}): pick "
                         "another with --port or --host") from None


def textual_server():
    try:
        from textual_serve.server import Server
    except ImportError:
        raise UsageError("specchat serve needs textual-serve: pip install 'specchat[serve]'") from None
    return Server


def chat_command(pair_name: str | None, theme: str | None, k: int | str | None,
                 config_file: Path | None, demo_rate: float | None) -> str:
    """The command line each browser tab runs: this Python's `specchat chat`, told that it
    is served."""
    words = [sys.executable, "-m", "specchat", "chat"]
    for flag, value in (("--pair", pair_name), ("--theme", theme), ("-k", k),
                        ("--config", config_file and Path(config_file).resolve()),
                        ("--demo", demo_rate)):
        if value is not None:
            words += [flag, str(value)]
    return shlex.join([*words, "--served"])
