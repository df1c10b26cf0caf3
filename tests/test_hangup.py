"""The chat ends within two seconds when its terminal goes away and leaves no process behind
(issue 24): with SIGHUP (the terminal was the chat's own) and without one (under `make chat`
the shell takes the signal, and the terminal is just hung up: reads return nothing at once,
which once kept a lone chat at 100% of a core). SIGTERM ends it like a quit (issue 40): the
terminal restored, the conversation saved, status 143. Real processes on a real
pseudo-terminal."""

from __future__ import annotations

import os
import sys
import time

import pytest
from pty_support import read_terminal, seconds_to_exit, start_chat, wait_until_drawn

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminals as on Linux")


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


def test_sigterm_restores_the_terminal_saves_the_conversation_and_exits_143(tmp_path):
    from specchat.history.store import HistoryStore

    chat, master = start_chat(tmp_path, owns_terminal=True)
    wait_until_drawn(master, chat)
    os.write(master, b"remember me\r")
    time.sleep(2.0)  # the demo pair answers
    chat.terminate()
    written = read_terminal(master, 10.0, chat)
    assert [what for code, what in RESTORED.items() if code not in written] == []
    assert chat.wait(timeout=10) == 143
    store = HistoryStore(tmp_path / "data" / "history.sqlite3")
    try:
        saved = store.load(store.list_conversations()[0].id)
    finally:
        store.close()
    assert [turn.role for turn in saved.turns] == ["user", "assistant"]
    assert saved.turns[0].text == "remember me" and saved.turns[1].text
