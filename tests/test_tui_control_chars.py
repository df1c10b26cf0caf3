"""The chat's screen shows control characters in model and saved text visibly (issue 40).

Textual does not neutralise them: it drops BEL, BS, VT, FF and CR, but writes ESC, CSI and
OSC sequences and C1 controls to the terminal as they are (checked on Textual 8.2.8: a
Static or a widget rendering `Content("\\x1b]0;PWNED")` sets the terminal's title). So the
transcript, the answers' Markdown view and the history screen render them as ^[ and
<U+009B>, while the text a copy takes stays exact. A pilot over a scripted answer, and a
real chat on a pseudo-terminal reopening a saved conversation, its bytes read back."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from pty_support import read_terminal, start_chat, wait_until_drawn
from tui_support import StepClock, ask, last_answer, make_app, ready, wait_for

from specchat.chat.scripted import FakeConfig, ScriptedRound
from specchat.control_chars import visible
from specchat.history.store import HistoryStore, SavedToken

OSC_TITLE, CLEAR, C1_CSI = "\x1b]0;PWNED\x07", "\x1b[2J", "\x9b31m"
ROUNDS = [ScriptedRound(("Hi", OSC_TITLE), (CLEAR,), " there", "resampled"),
          ScriptedRound((C1_CSI,), (), "\x07 done\x1b", "bonus")]
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


async def test_an_answer_draws_its_controls_visibly_and_copies_them_exactly():
    app = make_app({"fake": FakeConfig(name="fake", k=2, rounds=ROUNDS, clock=StepClock())})
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "hi")
        tokens = last_answer(app).tokens
        assert tokens.plain_text() == f"Hi{OSC_TITLE} there{C1_CSI}\x07 done\x1b"
        assert tokens.drawn_text() == "Hi^[]0;PWNED^G^[[2J there<U+009B>31m^G done^["
        await pilot.press("ctrl+t")  # the Markdown view of the same answer
        await pilot.pause()
        assert not RAW.search(str(last_answer(app)._markdown.source))


def write_evil_history(path: Path) -> None:
    """A conversation whose title, question and answer (with a ghost) set the title, clear
    the screen and carry a C1 CSI."""
    path.parent.mkdir(parents=True, exist_ok=True)
    store = HistoryStore(path)
    conversation = store.new_conversation(f"title{OSC_TITLE}", "demo")
    store.add_user_turn(conversation, f"ask{CLEAR}{C1_CSI}")
    answer = store.start_answer(conversation, "speculative k=2", "demo")
    store.append_tokens(answer, [SavedToken(f"ans{OSC_TITLE}", "accepted", 1),
                                 SavedToken(CLEAR, "rejected", 2),
                                 SavedToken(f"{C1_CSI}end", "resampled", 3)])
    store.finish_answer(answer, f"ans{OSC_TITLE}{C1_CSI}end", "done", None)
    store.close()


@pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminals as on Linux")
def test_a_reopened_conversation_sends_no_raw_escape_to_the_terminal(tmp_path):
    write_evil_history(tmp_path / "data" / "history.sqlite3")
    chat, master = start_chat(tmp_path, owns_terminal=True)
    try:
        wait_until_drawn(master, chat)
        os.write(master, b"\x1bOS")  # F4: the history, its titles listed
        listed = read_terminal(master, 2.0)
        os.write(master, b"\r")  # reopen the conversation
        shown = read_terminal(master, 3.0)
        os.write(master, b"\x11")  # Ctrl+Q
        read_terminal(master, 2.0)
    finally:
        chat.kill()
        chat.wait()
        os.close(master)
    assert b"title^[]0;PWNED^G" in listed and b"ans^[]0;PWNED^G" in shown
    assert b"<U+009B>31m" in shown
    for raw in (b"\x1b]0;PWNED", b"\x1b[2J", "\x9b".encode()):
        assert raw not in listed + shown, raw
