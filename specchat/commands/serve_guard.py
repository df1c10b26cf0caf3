"""Who may drive `specchat serve`'s chat: the origin check, the token, the session limit.

Each tab of the served page runs `specchat chat` as the user who started `serve`: whoever
holds its WebSocket types into the chat, reads the screen, opens, exports and deletes
saved conversations. The user's own browser makes the connections, so binding to
loopback keeps no web page out: any site open in that browser can script
ws://127.0.0.1:8000/ws. So a WebSocket passes three gates before a chat process starts:

- its Origin (every browser sends one; a page cannot forge it) is the page's own, the
  authority the request was addressed to (its Host), or --public-url's: a page of another
  site is refused (403);
- it carries the token `serve` printed in its URL (secrets.token_urlsafe, compared in
  constant time): another user of this machine, or a page on this host that guesses the
  port, is refused (403);
- fewer than --max-sessions chats run: the next tab is told why in its terminal, and no
  process starts.

How the page's script learns the token: it never does. The page opened with ?token=… sets
an HttpOnly, SameSite=Strict cookie (named with the port: cookies ignore ports) and
redirects to itself without the token, taking it out of the address bar (a projector, a
screenshot, the browser's history); the browser sends the cookie with the page's own
WebSocket. The other places are worse: textual.js appends `?width=…` to the WebSocket URL
the page names, so a token in its query would break it, and a token in its path would have
the page's own address keep the token too (the page is rendered per request, and its
Restart button reloads that address): on the projector and in the browser's history.
SameSite keeps other sites' requests from carrying the cookie, but a site is a host
whatever its port: a page served from another port of this host gets no further for it, as
the origin check refuses it, yet a server on another port that the browser visits receives
the cookie and could replay it (the README says so; Jupyter's cookie has the same limit).
The download route (files the chat hands to the browser) wants the cookie too; the static
files are textual-serve's own and public.

This module knows aiohttp's requests and textual-serve's Server class (handed in, never
imported here); of the chat it knows only that a session is a process.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import textwrap
from dataclasses import dataclass
from urllib.parse import urlsplit

import click
from aiohttp import web

TOKEN_BYTES = 32
QUERY = "token"
log = logging.getLogger("specchat.serve")


@dataclass(frozen=True)
class Gate:
    """What a request must show to reach the chat."""

    token: str | None
    """The secret in the URL that serve prints; None with --no-token (the origin check only)."""
    public_origin: str | None
    """--public-url's origin (lower case), allowed besides the page's own."""
    max_sessions: int
    """Chats that run at once; the next tab is told to wait."""
    cookie: str
    """The cookie that carries the token."""

    def page_url(self, base: str) -> str:
        """The URL to open: the page, with the token."""
        return f"{base}/?{QUERY}={self.token}" if self.token else base


def make_gate(with_token: bool, public_url: str | None, max_sessions: int, port: int) -> Gate:
    origin = None
    if public_url:
        parts = urlsplit(public_url)
        origin = f"{parts.scheme}://{parts.netloc}".lower()
    token = secrets.token_urlsafe(TOKEN_BYTES) if with_token else None
    return Gate(token, origin, max_sessions, f"specchat-serve-{port}")


def same_secret(given: str | None, token: str) -> bool:
    """`given` is the token, compared in constant time (any text, not only ASCII)."""
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def foreign_origin(origin: str | None, host: str | None, public_origin: str | None) -> bool:
    """The Origin header names neither the page's own authority (Host) nor --public-url."""
    if not origin:
        return True
    if public_origin is not None and origin.lower() == public_origin:
        return False
    try:
        authority = urlsplit(origin).netloc.lower()
    except ValueError:
        return True
    return not authority or authority != (host or "").lower()


def has_token(request: web.Request, gate: Gate) -> bool:
    return gate.token is None or same_secret(request.cookies.get(gate.cookie), gate.token)


def why_refused(request: web.Request, gate: Gate) -> str | None:
    """Why a WebSocket may not start a chat: a foreign origin, a missing or wrong token."""
    origin = request.headers.get("Origin")
    if foreign_origin(origin, request.headers.get("Host"), gate.public_origin):
        return f"the page's origin ({origin or 'none given'}) is not this server's"
    if not has_token(request, gate):
        return "no token, or a wrong one: open the URL that specchat serve printed"
    return None


def page_refusal(given: str | None) -> str:
    what = "this token is wrong" if given is not None else "this page needs its token"
    return (f"specchat serve: {what}: open the URL that `specchat serve` printed, "
            f"http://…/?{QUERY}=…\n")


def with_cookie(request: web.Request, gate: Gate, token: str) -> web.Response:
    """The page again without the token in its URL, the token (`gate.token`) now in a cookie."""
    query = {name: value for name, value in request.query.items() if name != QUERY}
    location = str(request.rel_url.with_query(query))
    response = web.Response(status=303, headers={"Location": location})
    response.set_cookie(gate.cookie, token, httponly=True, samesite="Strict", path="/")
    return response


def full_message(limit: int, width: int) -> bytes:
    """What a tab over the limit shows in its terminal (lines wrapped to its width)."""
    chats = "1 chat is" if limit == 1 else f"{limit} chats are"
    text = (f"specchat serve: {chats} open already, the most this server runs at once "
            f"(--max-sessions {limit}). Close one of them and reload this page, or restart "
            "specchat serve with a higher --max-sessions.")
    lines = textwrap.wrap(text, max(20, width - 2), break_on_hyphens=False)
    return ("\r\n" + "\r\n".join(f" {line}" for line in lines) + "\r\n").encode()


def guarded(server_class: type, gate: Gate) -> type:
    """textual-serve's Server, with the page, the WebSocket and downloads behind `gate`."""

    class GuardedServer(server_class):
        def __init__(self, *args, **options):
            super().__init__(*args, **options)
            self.sessions = 0

        async def on_startup(self, app: web.Application) -> None:
            """Quiet: its banner names the URL without the token; serve named the right one."""

        async def handle_index(self, request: web.Request) -> web.StreamResponse:
            given = request.query.get(QUERY)
            if gate.token is not None and given is not None:
                if not same_secret(given, gate.token):
                    return refuse(request, page_refusal(given))
                return with_cookie(request, gate, gate.token)
            if not has_token(request, gate):
                return refuse(request, page_refusal(None))
            return await super().handle_index(request)

        async def handle_download(self, request: web.Request) -> web.StreamResponse:
            if not has_token(request, gate):
                return refuse(request, page_refusal(None))
            return await super().handle_download(request)

        async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
            if why := why_refused(request, gate):
                return refuse(request, f"specchat serve: {why}\n")
            if self.sessions >= gate.max_sessions:
                return await tell_full(request, gate.max_sessions)
            self.sessions += 1
            try:
                return await super().handle_websocket(request)
            finally:
                self.sessions -= 1

    return GuardedServer


def refuse(request: web.Request, text: str) -> web.Response:
    """403, said in the response, on the server's stderr and in the log file."""
    said = f"refused {request.method} {request.path} from {request.remote}: {text.strip()}"
    click.echo(f"specchat: {said.replace('specchat serve: ', '')}", err=True)
    log.warning(said)
    return web.Response(status=403, text=text)


async def tell_full(request: web.Request, limit: int) -> web.WebSocketResponse:
    """Accept the tab's WebSocket only to say, in its terminal, why no chat starts; keep it
    open (the page would cover a closed one with "Session ended") until the tab goes."""
    websocket = web.WebSocketResponse(heartbeat=15)
    await websocket.prepare(request)
    asked = request.query.get("width", "80")
    width = min(int(asked), 200) if asked.isdigit() else 80
    await websocket.send_bytes(full_message(limit, width))
    click.echo(f"specchat: a tab from {request.remote} waits: {limit} chat(s) run already "
               "(--max-sessions)", err=True)
    log.warning("told a tab from %s that %d chats run already", request.remote, limit)
    async for _ in websocket:
        pass
    return websocket
