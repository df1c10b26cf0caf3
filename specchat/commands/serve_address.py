"""Where `specchat serve`'s page is reached from, and what URLs the page names.

textual-serve writes one public URL into every page (its CSS, its script, its WebSocket).
Left alone it would be the bind address, and http://0.0.0.0:8000 is no address a browser
on another machine can use. So, unless the user names one with --public-url (a proxy, a
tunnel), each page names the address its own browser used (the request's Host), and for
a wildcard bind the banner names an address of this machine that others can reach.

This module knows sockets, URLs and textual-serve's Server class (handed in, never
imported here); it knows nothing of the chat.
"""

from __future__ import annotations

import re
import socket
from contextvars import ContextVar
from urllib.parse import urlsplit

from specchat.errors import UsageError

LOOPBACK = ("127.0.0.1", "localhost", "::1")
WILDCARD = ("0.0.0.0", "::", "")
PROBE = {socket.AF_INET: "192.0.2.1", socket.AF_INET6: "2001:db8::1"}
"""Documentation addresses: connecting a UDP socket towards one sends nothing, but picks
the address this machine would send from (its primary address on the network)."""
HOST_HEADER = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$")

_PAGE_ORIGIN: ContextVar[str | None] = ContextVar("specchat_serve_page_origin", default=None)


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def http_url(host: str, port: int) -> str:
    return f"http://{url_host(host)}:{port}"


def checked_public_url(url: str) -> str:
    """--public-url as textual-serve wants it: scheme and host, no trailing slash."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--public-url must be an http:// or https:// URL with a host, as a "
                         f"browser would open it (got {url!r}), e.g. http://192.168.1.20:8000")
    if parts.query or parts.fragment:
        raise UsageError(f"--public-url takes no ?query or #fragment (got {url!r})")
    return url.strip().rstrip("/")


def primary_address(family: socket.AddressFamily = socket.AF_INET) -> str | None:
    """The address this machine reaches its network from, or None where it has none."""
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((PROBE[family], 9))
            address = probe.getsockname()[0]
    except OSError:
        return None
    return None if address in LOOPBACK or address in WILDCARD else address


def hostname_address() -> str | None:
    """This machine's name, where it resolves to something other than loopback."""
    name = socket.gethostname()
    try:
        resolved = socket.gethostbyname(name)
    except OSError:
        return None
    return None if resolved.startswith("127.") else name


def reachable_host(host: str) -> str:
    """The host a browser elsewhere uses for a server bound to `host`: for a wildcard,
    this machine's primary address (or its name); otherwise `host` itself."""
    if host not in WILDCARD:
        return host
    families = (socket.AF_INET6, socket.AF_INET) if host == "::" else (socket.AF_INET,)
    for family in families:
        if address := primary_address(family):
            return address
    return hostname_address() or "127.0.0.1"


def page_origin(scheme: str, host_header: str | None) -> str | None:
    """The origin a browser used for a page, from its Host header; None if it is odd."""
    if not host_header or not HOST_HEADER.match(host_header):
        return None
    return f"{scheme}://{host_header}"


def origin_following(server_class: type) -> type:
    """textual-serve's Server, but each page names the address its browser used.

    textual-serve reads `public_url` while it renders the index page; here that reads the
    origin of the request being served (a context variable: one per request task), and
    the URL given at construction elsewhere (its banner; a request with an odd Host)."""

    class OriginFollowingServer(server_class):
        @property
        def public_url(self) -> str:
            return _PAGE_ORIGIN.get() or self._fallback_url

        @public_url.setter
        def public_url(self, url: str) -> None:
            self._fallback_url = url

        async def handle_index(self, request):
            token = _PAGE_ORIGIN.set(page_origin(request.scheme, request.headers.get("Host")))
            try:
                return await super().handle_index(request)
            finally:
                _PAGE_ORIGIN.reset(token)

    return OriginFollowingServer
