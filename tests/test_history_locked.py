"""A history file that another program holds locked (issue 24): it is never taken for a
broken one and moved aside; the chat never freezes while it waits (a save waits a quarter of
a second at most, then pauses); what could not be saved lands once the lock goes, or, if the
chat quits or its terminal goes first, is written beside the database and named on stderr
(its folder made again if it went missing, an earlier copy never replaced; the temporary
folder only where the database's folder cannot be written, and the note says why).
The locks are real, held by a second process."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from pty_support import read_terminal, seconds_to_exit, start_chat, wait_until_drawn
from tui_support import ask, last_answer, make_app, ready, wait_for

from specchat.history.store import HistoryStore, open_history

SIZE = (150, 45)
HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
if sys.argv[2] == "readers-too":
    db.execute("PRAGMA locking_mode=EXCLUSIVE")  # shuts out readers as well as writers
db.execute("BEGIN EXCLUSIVE")
if sys.argv[2] == "readers-too":
    db.execute("SELECT count(*) FROM sqlite_master").fetchone()
print("locked", flush=True)
sys.stdin.read()  # until the test lets go
db.execute("ROLLBACK")
"""


@contextmanager
def locked(path: Path, how: str = "writers"):
    """Another process holds the file locked (against writers, or `readers-too`) meanwhile."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), how],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def history_with(path: Path, title: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    store = HistoryStore(path)
    store.new_conversation(title)
    store.close()


def history_file() -> Path:
    return Path(os.environ["SPECCHAT_DATA_DIR"]) / "history.sqlite3"


def titles(path: Path) -> list[str]:
    store = HistoryStore(path)
    try:
        return sorted(c.title for c in store.list_conversations())
    finally:
        store.close()


def problem_lines(app) -> str:
    return str(app.chat_screen.problems.render()) if app.chat_screen.problems.display else ""


def test_a_locked_file_is_an_error_to_wait_out_never_moved_aside(tmp_path):
    path = tmp_path / "history.sqlite3"
    history_with(path, "precious")
    with locked(path, "readers-too"):
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            open_history(path, 0.1)
    assert [p.name for p in tmp_path.iterdir() if "unreadable" in p.name] == []
    assert titles(path) == ["precious"]


async def asked_on_a_locked_file(question: str):
    """A chat over a history file another process holds locked (readers too) from before it
    starts, asked one question and closed: (the app, its problem line, the answer, the file)."""
    path = history_file()
    history_with(path, "precious")
    with locked(path, "readers-too"):
        app = make_app()
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            await ask(pilot, question)
            shown, answer = problem_lines(app), last_answer(app).text
    return app, shown, answer, path


async def test_the_chat_on_a_locked_file_says_so_and_saves_everything_once_the_lock_goes():
    _, shown, _, path = await asked_on_a_locked_file("hello there")
    assert "not being saved (database is locked)" in shown and "could not be read" not in shown
    assert not [p for p in path.parent.iterdir() if "unreadable" in p.name]
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        with locked(path):  # the chat has the file open: only writers can be shut out now
            await ask(pilot, "while locked")
            assert "kept in memory" in problem_lines(app)
        await wait_for(pilot, lambda: "being saved again: nothing was lost" in problem_lines(app),
                       timeout=15)
    assert titles(path) == ["precious", "while locked"]


class LoopGaps:
    """The longest time the app's event loop went without running a 20 ms timer."""

    def __init__(self, app):
        self.last, self.longest = time.monotonic(), 0.0
        app.set_interval(0.02, self.tick)

    def tick(self) -> None:
        now = time.monotonic()
        self.longest, self.last = max(self.longest, now - self.last), now


async def test_a_locked_file_never_freezes_the_chat():
    """With the store's real 10 s busy timeout in place: each save used to wait it out on
    the UI thread, every round, so one answer froze the screen for a minute."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        gaps = LoopGaps(app)
        with locked(history_file()):
            started = time.monotonic()
            await ask(pilot, "hello")
            await pilot.press(*"abc")
            await wait_for(pilot, lambda: app.screen.query_one("#input").text == "abc")
            took = time.monotonic() - started
            await asyncio.sleep(2.0)  # the retry timer keeps trying meanwhile
            await pilot.pause()
        assert "kept in memory" in problem_lines(app)
        assert took < 5.0, took
        assert gaps.longest < 1.5, gaps.longest


async def test_quitting_while_saves_fail_writes_the_conversation_beside_the_database():
    app, _, answer, path = await asked_on_a_locked_file("remember this")
    note = app.history.unsaved_note()
    copies = list(path.parent.glob("history.sqlite3.unsaved-*.md"))
    assert len(copies) == 1 and note is not None and str(copies[0]) in note
    text = copies[0].read_text()
    assert "remember this" in text and answer.strip() in text


@contextmanager
def a_real_chat_answered_on_a_locked_file(tmp_path: Path):
    """A real chat (the demo pair, on a pty) whose history file another process holds locked,
    once it has answered "keep my words": (the chat, its terminal, the history file)."""
    path = tmp_path / "data" / "history.sqlite3"
    history_with(path, "precious")
    with locked(path, "readers-too"):
        chat, master = start_chat(tmp_path, owns_terminal=True)
        wait_until_drawn(master, chat)
        os.write(master, b"keep my words\r")
        time.sleep(3.0)  # the demo pair answers
        yield chat, master, path


def the_unsaved_copy(path: Path) -> Path:
    """The one Markdown copy beside the history file, holding the words."""
    copies = list(path.parent.glob("history.sqlite3.unsaved-*.md"))
    assert len(copies) == 1 and "keep my words" in copies[0].read_text()
    return copies[0]


@pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminals as on Linux")
def test_quitting_a_real_chat_on_a_locked_file_names_the_unsaved_copy_on_stderr(tmp_path):
    with a_real_chat_answered_on_a_locked_file(tmp_path) as (chat, master, path):
        os.write(master, b"\x11")  # Ctrl+Q
        seen = read_terminal(master, 10.0, chat)
    assert chat.wait(timeout=10) == 0
    said = seen.replace(b"\r\n", b"").replace(b"\n", b"")
    assert f"this conversation is in {the_unsaved_copy(path)}".encode() in said


@pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminals as on Linux")
def test_a_hung_up_chat_on_a_locked_file_still_ends_within_two_seconds_and_keeps_the_words(tmp_path):
    with a_real_chat_answered_on_a_locked_file(tmp_path) as (chat, master, path):
        os.close(master)  # the terminal goes away
        assert seconds_to_exit(chat) < 2.0
    the_unsaved_copy(path)


def words_kept():
    """A conversation of one message, as the recorder holds it in memory."""
    from specchat.history.store import SavedConversation, SavedTurn

    return SavedConversation(0, "t", "p", None, 0.0, 0.0, [SavedTurn("user", "keep my words")])


def test_an_unsaved_copy_goes_beside_the_database_even_where_its_folder_went_missing(tmp_path,
                                                                                    monkeypatch):
    """Issue 40: a data folder removed while the chat ran sent the copy to the temporary folder."""
    from specchat.tui.recorder import write_unsaved_copy

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    copy = write_unsaved_copy(words_kept(), tmp_path / "gone" / "history.sqlite3")
    assert copy is not None and copy.parent == tmp_path / "gone"
    assert "keep my words" in copy.read_text()


def test_two_unsaved_copies_in_the_same_second_are_both_kept(tmp_path, monkeypatch):
    from specchat.tui.recorder import write_unsaved_copy

    monkeypatch.setattr("time.strftime", lambda *_: "20261126-120000")
    copies = [write_unsaved_copy(words_kept(), tmp_path / "history.sqlite3") for _ in range(2)]
    assert [c.name for c in copies] == ["history.sqlite3.unsaved-20261126-120000.md",
                                        "history.sqlite3.unsaved-20261126-120000-2.md"]


async def test_only_a_folder_that_cannot_be_written_sends_the_copy_to_the_temporary_folder(
        tmp_path, monkeypatch):
    """The history's folder cannot exist (a file has its name): the copy goes to the temporary
    folder, named as specchat's, and the note on stderr says where and why."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "blocked").write_text("a file where the history's folder should be")
    app = make_app(history_path=tmp_path / "blocked" / "history.sqlite3")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "keep my words")
    copy, = (tmp_path / "tmp").glob("specchat-history.sqlite3.unsaved-*.md")
    assert "keep my words" in copy.read_text()
    assert app.history.unsaved_note().endswith(
        f"this conversation is in {copy} (its folder {tmp_path / 'blocked'} cannot be written)")
