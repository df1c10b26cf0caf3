"""History never silently stops (issue 24): an unreadable file is moved aside and a fresh
one started, and the chat says so on screen; the schema carries a version and an older
file is migrated; two chats on one data folder both save every turn; a save that fails
mid-answer keeps the text in memory, says so, and lands once the file can be written."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from tui_support import ask, make_app, ready, saved_conversation

from specchat.chat.events import TokenSpan
from specchat.history.store import SCHEMA, SCHEMA_VERSION, HistoryStore, NewerHistory, open_history
from specchat.tui.recorder import RETRY_FIRST_S, HistoryRecorder

ROOT = Path(__file__).resolve().parent.parent
SIZE = (150, 45)


def history_file() -> Path:
    folder = Path(os.environ["SPECCHAT_DATA_DIR"])
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "history.sqlite3"


def test_an_unreadable_file_is_moved_aside_under_a_timestamped_name(tmp_path):
    path = tmp_path / "history.sqlite3"
    path.write_bytes(b"not a database at all " * 100)
    store, note = open_history(path)
    aside = [p for p in tmp_path.iterdir() if ".unreadable-" in p.name]
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"not a database")
    assert "moved it to" in note and aside[0].name in note
    store.new_conversation("fresh")
    assert [c.title for c in store.list_conversations()] == ["fresh"]


async def test_the_chat_says_on_screen_that_it_moved_a_broken_history_aside_and_saves_anew():
    history_file().write_bytes(b"\x00garbage" * 512)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        bar = app.chat_screen.problems
        assert bar.display and "could not be read" in str(bar.render())
        await ask(pilot, "hi")
    assert [t.role for t in saved_conversation().turns] == ["user", "assistant"]


def test_an_older_file_is_migrated_to_the_current_schema_keeping_its_rows(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)  # as files were written before the version was kept: version 0
    db.execute("INSERT INTO conversations (title, pair, created, updated) VALUES ('old', 'p', 1, 1)")
    db.commit()
    db.close()
    store = HistoryStore(path)
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert [c.title for c in store.list_conversations()] == ["old"]


def test_a_newer_specchats_file_is_left_alone_and_refused_by_name(tmp_path):
    path = tmp_path / "new.sqlite3"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(NewerHistory, match="newer"):
        open_history(path)
    assert path.is_file() and not list(tmp_path.glob("*.unreadable-*"))


WRITER = textwrap.dedent("""
    import sys
    from specchat.history.store import HistoryStore, SavedToken
    store = HistoryStore(sys.argv[1])
    name = sys.argv[2]
    for turn in range(40):
        conversation = store.new_conversation(f"{name} {turn}", name)
        store.add_user_turn(conversation, "hello")
        answer = store.start_answer(conversation, "k=2")
        for n in range(5):
            store.append_tokens(answer, [SavedToken(f" {n}", "accepted", n)])
        store.finish_answer(answer, " 0 1 2 3 4", "done", None)
    print("done", flush=True)
""")


def test_two_processes_on_one_file_both_save_every_turn(tmp_path):
    path = tmp_path / "shared.sqlite3"
    HistoryStore(path).close()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name in ("first", "second")]
    outputs = [w.communicate(timeout=120) for w in writers]
    assert [w.returncode for w in writers] == [0, 0], [err for _, err in outputs]
    store = HistoryStore(path)
    conversations = store.list_conversations(limit=1000)
    assert sorted(c.pair for c in conversations).count("first") == 40
    assert sorted(c.pair for c in conversations).count("second") == 40
    assert all(store.load(c.id).turns[-1].text == " 0 1 2 3 4" for c in conversations)


def test_a_save_that_fails_mid_answer_keeps_the_text_says_so_and_lands_later(tmp_path):
    path = tmp_path / "h.sqlite3"
    said: list[str] = []
    recorder = HistoryRecorder(path, said.append)
    recorder.new_chat(None)
    recorder.user("hello", "p")
    recorder.start_answer("k=2", "p")
    blocker = sqlite3.connect(path)
    blocker.execute("BEGIN EXCLUSIVE")  # another program holds the file mid-answer
    for word in (" one", " two"):
        recorder.spans((TokenSpan(word, "accepted", 1),))
        recorder.flush()
    recorder.finish(None, "done", " one two")
    assert recorder.unsaved > 0 and len(said) == 1 and "kept in memory" in said[0]
    blocker.rollback()
    blocker.close()
    time.sleep(RETRY_FIRST_S)  # the pause after a failed try
    recorder.spans(())
    recorder.flush()  # the next save tries the queue again
    assert recorder.unsaved == 0 and "saved again" in said[-1]
    store = HistoryStore(path)
    saved = store.load(1)
    assert [t.role for t in saved.turns] == ["user", "assistant"]  # each step ran once, whole
    assert store.db.execute("SELECT seq FROM tokens ORDER BY seq").fetchall() == [(0,), (1,)]
    assert [t.text for t in saved.turns[-1].tokens] == [" one", " two"]
    assert saved.turns[-1].text == " one two" and saved.turns[-1].status == "done"


def test_rounds_that_arrive_after_close_are_kept_quietly_and_never_touch_the_closed_file(tmp_path):
    """After a hang-up the recorder is closed while rounds may still arrive until the forced
    exit: they must not reach the closed database, nor report a false saving problem."""
    path = tmp_path / "h.sqlite3"
    said: list[str] = []
    recorder = HistoryRecorder(path, said.append)
    recorder.new_chat(None)
    recorder.user("hello", "p")
    recorder.start_answer("k=2", "p")
    recorder.spans((TokenSpan(" one", "accepted", 1),))
    recorder.flush()
    recorder.close()
    recorder.spans((TokenSpan(" two", "accepted", 2),))
    recorder.flush()
    recorder.flush(at_once=True)
    recorder.finish(None, "done", " one two")
    assert recorder.list() == [] and recorder.load(1) is None
    assert said == [] and recorder.unsaved_copy is None
    saved = HistoryStore(path).load(1)
    assert [t.text for t in saved.turns[-1].tokens] == [" one"]


def test_an_answer_cut_off_mid_stream_lands_in_the_unsaved_copy_without_its_ghosts(tmp_path):
    path = tmp_path / "h.sqlite3"
    recorder = HistoryRecorder(path, lambda _: None)
    recorder.new_chat(None)
    blocker = sqlite3.connect(path)
    blocker.execute("BEGIN EXCLUSIVE")  # another program holds the file: nothing lands
    recorder.user("hello", "p")
    recorder.start_answer("k=2", "p")
    recorder.spans((TokenSpan(" kept", "accepted", 1), TokenSpan(" ghost", "rejected", 2),
                    TokenSpan(" too", "resampled", 3)))
    recorder.close()
    blocker.rollback()
    blocker.close()
    text = recorder.unsaved_copy.read_text()
    assert " kept too" in text and "ghost" not in text
