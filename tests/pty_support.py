"""A real chat on a real pseudo-terminal, for the tests of how it ends (test_hangup.py,
test_history_locked.py): started on the demo pair in a 120×40 terminal it may own, read
until it is drawn or until it exits, and timed to its exit."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def become_terminal_owner() -> None:
    """In the child: a new session whose controlling terminal is the pty on stdin."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def start_chat(tmp_path: Path, owns_terminal: bool) -> tuple[subprocess.Popen, int]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color",
               SPECCHAT_CONFIG_DIR=str(tmp_path / "config"), SPECCHAT_DATA_DIR=str(tmp_path / "data"))
    chat = subprocess.Popen([sys.executable, "-m", "specchat", "chat", "--demo", "100"],
                            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT,
                            preexec_fn=become_terminal_owner if owns_terminal else None)
    os.close(slave)
    return chat, master


def wait_until_drawn(master: int, chat: subprocess.Popen, timeout: float = 60.0) -> None:
    """Read the screen until the chat shows its status line (the app is up and idle)."""
    seen, deadline = b"", time.monotonic() + timeout
    while b"ready" not in seen and time.monotonic() < deadline and chat.poll() is None:
        if select.select([master], [], [], 0.2)[0]:
            seen = (seen + os.read(master, 65536))[-20000:]
    assert b"ready" in seen, seen[-2000:]


def seconds_to_exit(chat: subprocess.Popen, limit: float = 5.0) -> float:
    started = time.monotonic()
    try:
        chat.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        chat.kill()
        chat.wait()
        return float("inf")
    return time.monotonic() - started


def read_terminal(master: int, seconds: float, chat: subprocess.Popen | None = None) -> bytes:
    """What the chat writes to its terminal for `seconds`, or until it ends where `chat` is
    given."""
    seen, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline:
        if select.select([master], [], [], 0.1)[0]:
            try:
                seen += os.read(master, 65536)
            except OSError:  # the chat ended and closed its side
                break
        elif chat is not None and chat.poll() is not None:
            break
    return seen
