"""The chat ends within two seconds when its terminal goes away and leaves no process behind
(issue 24): with SIGHUP (the terminal was the chat's own) and without one (under `make chat`
the shell takes the signal, and the terminal is just hung up: reads return nothing at once,
which once kept a lone chat at 100% of a core). SIGTERM ends it like a quit (issue 40): the
terminal restored, the conversation saved, status 143. Real processes on a real
pseudo-terminal."""

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

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminals as on Linux")


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


@pytest.mark.parametrize("owns_terminal", [True, False], ids=["sighup", "hung-up-without-signal"])
def test_the_chat_exits_within_two_seconds_when_its_terminal_goes_away(tmp_path, owns_terminal):
    chat, master = start_chat(tmp_path, owns_terminal)
    wait_until_drawn(master, chat)
    os.close(master)  # the terminal goes away
    assert seconds_to_exit(chat) < 2.0
    assert chat.returncode != 0  # ended by the hang-up, not by a user's quit


RESTORED = {b"\x1b[?1049l": "leaves the alternate screen", b"\x1b[?25h": "shows the cursor",
            b"\x1b[?1000l": "ends mouse tracking", b"\x1b[?1003l": "ends any-event mouse tracking",
            b"\x1b[?1006l": "ends SGR mouse reports"}


def read_until_exit(master: int, chat: subprocess.Popen, limit: float = 10.0) -> bytes:
    """What the chat writes to its terminal until it ends."""
    seen, deadline = b"", time.monotonic() + limit
    while time.monotonic() < deadline:
        if select.select([master], [], [], 0.2)[0]:
            try:
                seen += os.read(master, 65536)
            except OSError:  # the chat ended and closed its side
                break
        elif chat.poll() is not None:
            break
    return seen


def test_sigterm_restores_the_terminal_saves_the_conversation_and_exits_143(tmp_path):
    from specchat.history.store import HistoryStore

    chat, master = start_chat(tmp_path, owns_terminal=True)
    wait_until_drawn(master, chat)
    os.write(master, b"remember me\r")
    time.sleep(2.0)  # the demo pair answers
    chat.terminate()
    written = read_until_exit(master, chat)
    assert [what for code, what in RESTORED.items() if code not in written] == []
    assert chat.wait(timeout=10) == 143
    store = HistoryStore(tmp_path / "data" / "history.sqlite3")
    try:
        saved = store.load(store.list_conversations()[0].id)
    finally:
        store.close()
    assert [turn.role for turn in saved.turns] == ["user", "assistant"]
    assert saved.turns[0].text == "remember me" and saved.turns[1].text
