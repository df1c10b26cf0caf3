"""`specchat serve --host 0.0.0.0` (the README's advice for a talk) gives a page another
machine can load: the page's stylesheet, script and WebSocket name the address the
browser used, never the bind address 0.0.0.0; --public-url names the address for a proxy
or a tunnel; the URL to open is printed on stderr."""

from __future__ import annotations

import asyncio
import re
import urllib.request

import pytest
from click.testing import CliRunner

from serve_support import open_chat, open_page, serving
from specchat.cli import main

pytest.importorskip("textual_serve", reason="pip install 'specchat[serve]'")


def other_address() -> str | None:
    """A non-loopback IPv4 address of this machine's interfaces, if it has one."""
    psutil = pytest.importorskip("psutil")
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family.name == "AF_INET" and not address.address.startswith("127."):
                return address.address
    return None


def page_urls(page: str) -> list[str]:
    """The URLs of this server that a page loads: stylesheet, script, WebSocket."""
    found = re.findall(r'(?:href|src|data-session-websocket-url)="((?:https?|wss?)://[^"]*)"',
                       page)
    return [url for url in found if "fonts.googleapis" not in url]


def fetch(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=20) as response:
        return response.status, response.read().decode("utf-8", "replace")


def assert_page_loads_through(origin: str, token: str) -> None:
    cookie, page = open_page(origin, token)
    urls = page_urls(page)
    assert len(urls) == 3, urls
    assert all("0.0.0.0" not in url for url in urls), urls
    authority = origin.split("://", 1)[1]
    assert all(url.split("://", 1)[1].startswith(authority + "/") for url in urls), urls
    script = next(url for url in urls if url.endswith(".js"))
    assert fetch(script)[0] == 200
    ws_url = next(url for url in urls if url.startswith("ws"))
    headers = {"Origin": origin, "Cookie": cookie}
    assert len(asyncio.run(open_chat(ws_url, headers))) >= 1000


def test_a_page_served_on_a_wildcard_host_loads_through_every_address_of_this_machine(tmp_path):
    with serving(tmp_path, "--host", "0.0.0.0") as served:
        port = served.port
        assert_page_loads_through(f"http://127.0.0.1:{port}", served.token)
        if address := other_address():
            assert_page_loads_through(f"http://{address}:{port}", served.token)
    stderr = served.stderr()
    opened = re.search(r"open (http://\S+?);", stderr)
    assert opened and "0.0.0.0" not in opened.group(1), stderr
    if address:
        assert opened.group(1) == f"http://{address}:{port}/?token={served.token}"
    assert f"on this machine http://127.0.0.1:{port}/?token={served.token}" in stderr


def test_public_url_is_the_address_every_page_names(tmp_path):
    with serving(tmp_path, "--public-url", "https://talk.example.org/") as served:
        urls = page_urls(open_page(served.origin, served.token)[1])
    stderr = served.stderr()
    assert urls == ["https://talk.example.org/static/css/xterm.css",
                    "https://talk.example.org/static/js/textual.js",
                    "wss://talk.example.org/ws"]
    assert f"open https://talk.example.org/?token={served.token} (Ctrl+C stops)" in stderr


@pytest.mark.parametrize("url", ["0.0.0.0:8000", "ftp://host/", "http://", "http://h/?x=1", ""])
def test_a_public_url_a_browser_cannot_open_is_one_line_before_serving(url):
    result = CliRunner().invoke(main, ["serve", "--demo", "5", "--public-url", url])
    assert result.exit_code == 2, result.output
    assert "--public-url" in result.output and "serving" not in result.output
    assert len(result.output.strip().splitlines()) == 1
