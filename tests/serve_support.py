"""Helpers for the `specchat serve` tests: a real server process on a free port, with its
own folders, stopped with its whole process group."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
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


@contextlib.contextmanager
def serving(folder: Path, *args: str):
    """`specchat serve --demo 60 ARGS` on a free port: yields (port, process)."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for name in ("CONFIG", "DATA", "LOG"):
        env[f"SPECCHAT_{name}_DIR"] = str(folder / name.lower())
    server = subprocess.Popen([sys.executable, "-m", "specchat", "serve", "--demo", "60",
                               "--port", str(port), *args], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True)
    try:
        wait_until_listening(port, server)
        yield port, server
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
