"""Helpers for the `specchat serve` tests: a real server process on a free port, with its
own folders, stopped with its whole process group; the URL it printed (with its token);
opening the page and its WebSocket as the page's script does."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_listening(port: int, server: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"specchat serve exited: {server.stderr.read().decode()}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError("specchat serve did not listen in time")


@dataclass
class Served:
    """A running `specchat serve` and the URL it told the user to open."""

    port: int
    process: subprocess.Popen
    banner: str
    """Its first line on stderr: the URL to open, with the token."""

    @property
    def token(self) -> str | None:
        found = re.search(r"\?token=([\w-]+)", self.banner)
        return found.group(1) if found else None

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def cookie(self) -> str:
        """The Cookie header the page's WebSocket carries once the page was opened."""
        return f"specchat-serve-{self.port}={self.token}"

    def stderr(self) -> str:
        """All it said on stderr (once stopped)."""
        return self.banner + self.process.stderr.read().decode()


@contextlib.contextmanager
def serving(folder: Path, *args: str):
    """`specchat serve --demo 60 ARGS` on a free port: yields a `Served`."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for name in ("CONFIG", "DATA", "LOG"):
        env[f"SPECCHAT_{name}_DIR"] = str(folder / name.lower())
    server = subprocess.Popen([sys.executable, "-m", "specchat", "serve", "--demo", "60",
                               "--port", str(port), *args], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    try:
        wait_until_listening(port, server)
        yield Served(port, server, server.stderr.readline().decode())
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


async def open_chat(ws_url: str, headers: dict[str, str], enough: int = 1000) -> bytes:
    """Open a WebSocket as the page's script does (a 403 raises aiohttp's
    WSServerHandshakeError) and return what it shows first: `enough` bytes, or what came
    before the server stopped sending for 5 s."""
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(ws_url + "?width=80&height=24", headers=headers) as ws:
            await ws.send_json(["resize", {"width": 80, "height": 24}])
            return await received(ws, enough)


async def received(ws, enough: int, quiet_s: float = 5) -> bytes:
    import aiohttp

    shown = b""
    while len(shown) < enough:
        try:
            message = await asyncio.wait_for(ws.receive(), timeout=quiet_s)
        except asyncio.TimeoutError:
            break
        if message.type not in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT):
            break
        shown += message.data if isinstance(message.data, bytes) else message.data.encode()
    return shown


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **options):
        return None


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict, str]:
    """GET without following redirects: (status, headers, body), a 403 too."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.build_opener(NoRedirects).open(request, timeout=20) as response:
            return response.status, response.headers, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode("utf-8", "replace")


def open_page(origin: str, token: str) -> tuple[str, str]:
    """Open the page as the printed URL does: ?token= sets the cookie and redirects to the
    page; returns (the Cookie header the browser then sends, the page)."""
    status, headers, _ = get(f"{origin}/?token={token}")
    assert status == 303 and headers["Location"] == "/", (status, dict(headers))
    cookie = headers["Set-Cookie"].split(";")[0]
    status, _, page = get(origin + "/", {"Cookie": cookie})
    assert status == 200, page
    return cookie, page
