"""Who may drive `specchat serve`'s chat (issue 40): a page of another site is refused, so is
a connection without the printed URL's token or with a wrong one, each before a chat
process starts; a tab over --max-sessions is told why in its terminal; the page opened
with the token, and its own WebSocket, are let in. Against a real `specchat serve --demo`
process, with an aiohttp client sending what a browser would (its Origin, its cookie);
tests/test_serve_browser.py drives the same server from headless Chromium."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from click.testing import CliRunner

from serve_support import get, open_chat, open_page, received, serving
from specchat.cli import main

pytest.importorskip("textual_serve", reason="pip install 'specchat[serve]'")
aiohttp = pytest.importorskip("aiohttp")
psutil = pytest.importorskip("psutil")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server for the refusals: none of them starts a chat."""
    with serving(tmp_path_factory.mktemp("serve")) as served:
        yield served


def chats(served) -> int:
    """Chat processes the server runs now (textual-serve starts each through a shell)."""
    found = 0
    for child in psutil.Process(served.process.pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            found += child.status() != psutil.STATUS_ZOMBIE and "chat" in child.cmdline()
    return found


async def until_no_chat_runs(served, timeout: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while chats(served) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)


def refused(served, headers: dict[str, str]) -> int:
    """The HTTP status that refused the WebSocket (fails if it was let in)."""
    ws_url = f"ws://127.0.0.1:{served.port}/ws"
    with pytest.raises(aiohttp.WSServerHandshakeError) as refusal:
        asyncio.run(open_chat(ws_url, headers))
    return refusal.value.status


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1:1",
                                    "https://127.0.0.1.evil.example", "null", None])
def test_a_page_of_another_site_is_refused_before_a_chat_starts(served, origin):
    """With the right token even: the browser would send it for any page on this host."""
    headers = {"Cookie": served.cookie} | ({"Origin": origin} if origin else {})
    assert refused(served, headers) == 403
    assert chats(served) == 0


@pytest.mark.parametrize("cookie", [None, "specchat-serve-{port}=wrong",
                                    "specchat-serve-{port}={token}x", "specchat-serve-1={token}"])
def test_a_missing_or_wrong_token_is_refused_before_a_chat_starts(served, cookie):
    headers = {"Origin": served.origin}
    if cookie:
        headers["Cookie"] = cookie.format(port=served.port, token=served.token)
    assert refused(served, headers) == 403
    assert chats(served) == 0


@pytest.mark.parametrize("query", ["", "?token=wrong", "?token=", "?fontsize=20"])
def test_the_page_without_its_token_says_how_to_open_it(served, query):
    status, _, text = get(f"{served.origin}/{query}")
    assert status == 403 and "open the URL that `specchat serve` printed" in text
    assert "data-session-websocket-url" not in text


def test_the_printed_url_sets_the_token_as_a_cookie_and_leaves_the_address_bar(served):
    status, headers, _ = get(f"{served.origin}/?fontsize=20&token={served.token}")
    assert status == 303 and headers["Location"] == "/?fontsize=20"
    cookie = headers["Set-Cookie"]
    assert cookie.startswith(f"specchat-serve-{served.port}={served.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert len(served.token) >= 40 and served.token not in open_page(served.origin,
                                                                      served.token)[1]


def test_the_right_origin_and_token_open_a_chat(tmp_path):
    with serving(tmp_path) as served:
        cookie, _ = open_page(served.origin, served.token)
        shown = asyncio.run(open_chat(f"ws://127.0.0.1:{served.port}/ws",
                                      {"Origin": served.origin, "Cookie": cookie}))
    assert len(shown) >= 1000


async def over_the_limit(served):
    """Two tabs at once, then the first goes and a third comes: what each showed first,
    the chats running while two tabs were open, whether the second's socket stayed open."""
    headers = {"Origin": served.origin, "Cookie": served.cookie}
    async with aiohttp.ClientSession() as session:
        url = f"ws://127.0.0.1:{served.port}/ws?width=60&height=24"
        first = await session.ws_connect(url, headers=headers)
        shown = [await received(first, 1000)]
        second = await session.ws_connect(url, headers=headers)
        shown.append(await received(second, 50))
        running = chats(served)
        await asyncio.sleep(1)
        still_open = not second.closed
        await first.close()  # the first tab goes: its place is free again
        await until_no_chat_runs(served)
        shown.append(await open_chat(url.split("?")[0], headers))
    return shown, running, still_open


def test_a_tab_over_the_session_limit_is_told_why_and_no_chat_starts_for_it(tmp_path):
    with serving(tmp_path, "--max-sessions", "1") as served:
        (first, over, again), running, still_open = asyncio.run(over_the_limit(served))
        lines = over.decode().split("\r\n")
    assert len(first) >= 1000 and running == 1
    said = " ".join(line.strip() for line in lines)
    assert "1 chat is open already" in said and "(--max-sessions 1)" in said, said
    assert max(len(line) for line in lines) <= 60, lines
    assert still_open, "the page would cover a closed socket with 'Session ended'"
    assert len(again) >= 1000
    assert "waits: 1 chat(s) run already" in served.stderr()


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_max_sessions_must_be_a_count_of_one_or_more(value, monkeypatch):
    import specchat.commands.serve as serve_command

    class NoServer:  # were the value let through, the command would end here, not serve
        def __init__(self, *args, **options):
            pass

        def serve(self):
            pass

    monkeypatch.setattr(serve_command, "textual_server", lambda: NoServer)
    result = CliRunner().invoke(main, ["serve", "--demo", "5", "--max-sessions", value])
    assert result.exit_code == 2 and "--max-sessions" in result.output
    assert "serving" not in result.output


def test_the_default_session_limit_is_small():
    serve = main.get_command(None, "serve")
    assert next(p for p in serve.params if p.name == "max_sessions").default == 2


def test_no_token_warns_and_keeps_the_origin_check(tmp_path):
    with serving(tmp_path, "--no-token") as served:
        status, _, page = get(served.origin + "/")
        assert status == 200 and "data-session-websocket-url" in page
        assert refused(served, {"Origin": "http://evil.example"}) == 403
    stderr = served.stderr()
    assert served.token is None and f"open {served.origin} (Ctrl+C stops)" in stderr
    assert "warning: --no-token: any program on this machine" in stderr


def test_the_public_url_is_an_allowed_origin_besides_the_pages_own():
    from specchat.commands.serve_guard import foreign_origin

    public = "https://talk.example.org"
    assert not foreign_origin("https://talk.example.org", "127.0.0.1:8000", public)
    assert not foreign_origin("http://127.0.0.1:8000", "127.0.0.1:8000", public)
    assert foreign_origin("https://talk.example.org.evil", "127.0.0.1:8000", public)
    assert foreign_origin("http://talk.example.org", "127.0.0.1:8000", public)
    assert foreign_origin("http://[::1", "127.0.0.1:8000", None)


def test_the_token_is_compared_in_constant_time(monkeypatch):
    from specchat.commands import serve_guard

    compared = []
    real = serve_guard.hmac.compare_digest
    monkeypatch.setattr(serve_guard.hmac, "compare_digest",
                        lambda a, b: compared.append((a, b)) or real(a, b))
    assert serve_guard.same_secret("tok", "tok") and not serve_guard.same_secret("tök", "tok")
    assert compared == [(b"tok", b"tok"), ("tök".encode(), b"tok")]
