"""History: rows written as an answer streams survive a kill -9; exports keep the
committed text free of rejected drafts; interrupted answers read back as such."""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from specchat.history import export
from specchat.history.store import HistoryStore, SavedToken

ROOT = Path(__file__).resolve().parent.parent

WRITER = textwrap.dedent("""
    import sys, time
    from specchat.history.store import HistoryStore, SavedToken
    store = HistoryStore(sys.argv[1])
    conversation = store.new_conversation("crash test", "tiny")
    store.add_user_turn(conversation, "hello")
    answer = store.start_answer(conversation, "speculative k=4")
    for n in range(1000000):
        store.append_tokens(answer, [SavedToken(f" t{n}", "accepted", n), SavedToken(" x", "rejected", 0)])
        print(n, flush=True)
        time.sleep(0.002)
""")


def test_rounds_committed_before_a_kill_9_are_all_there(tmp_path):
    db = tmp_path / "history.sqlite3"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE,
                              text=True, env=env)
    reported = -1
    deadline = time.monotonic() + 30
    while reported < 50 and time.monotonic() < deadline:
        reported = int(writer.stdout.readline())
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    assert reported >= 50
    saved = HistoryStore(db).load(1)
    answer = saved.turns[-1]
    committed = [t for t in answer.tokens if t.kind == "accepted"]
    assert len(committed) >= reported + 1
    assert [t.text for t in committed[:reported + 1]] == [f" t{n}" for n in range(reported + 1)]
    assert answer.status == "interrupted"
    assert answer.text.startswith(" t0 t1 t2") and " x" not in answer.text


def saved_conversation(tmp_path):
    store = HistoryStore(tmp_path / "h.sqlite3")
    conversation = store.new_conversation("Sea <poem>", "tiny", "be brief")
    store.add_user_turn(conversation, "Write about the sea")
    answer = store.start_answer(conversation, "speculative k=2")
    store.append_tokens(answer, [SavedToken("Waves", "accepted", 1), SavedToken(" ghost", "rejected", 2),
                                 SavedToken(" roll", "resampled", 3), SavedToken(".", "bonus", 4)])
    store.finish_answer(answer, "Waves roll.", "done", {"tokens_per_s": 12.5, "acceptance_rate": 0.5})
    return store.load(conversation)


def test_markdown_export_holds_the_committed_text_only(tmp_path):
    text = export.to_markdown(saved_conversation(tmp_path))
    assert "Waves roll." in text and "ghost" not in text
    assert "be brief" in text and "12.5 tok/s" in text


def test_json_export_lists_every_token_with_its_kind(tmp_path):
    data = json.loads(export.to_json(saved_conversation(tmp_path)))
    answer = data["turns"][1]
    assert answer["text"] == "Waves roll."
    assert [t["kind"] for t in answer["tokens"]] == ["accepted", "rejected", "resampled", "bonus"]


def test_html_export_is_self_contained_and_coloured_with_ghosts_hidden(tmp_path):
    colours = {"accepted": "#00aa00", "rejected": "#aa0000", "resampled": "#aaaa00",
               "bonus": "#0000aa", "target": "#111111", "foreground": "#eeeeee",
               "background": "#000000"}
    page = export.to_html(saved_conversation(tmp_path), colours)
    assert ".accepted{color:#00aa00}" in page and ".bonus{color:#0000aa}" in page
    assert '<span class="rejected"> ghost</span>' in page
    assert ".rejected{text-decoration:line-through" in page and "display:none" in page
    assert "Sea &lt;poem&gt;" in page
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing to fetch


def test_html_export_draws_a_ghosts_newline_as_a_mark_and_keeps_the_answers_own(tmp_path):
    store = HistoryStore(tmp_path / "h.sqlite3")
    conversation = store.new_conversation("lines")
    answer = store.start_answer(conversation, "speculative k=2")
    store.append_tokens(answer, [SavedToken("one", "accepted", 1), SavedToken(".\n", "rejected", 2),
                                 SavedToken(" more\n", "resampled", 3)])
    store.finish_answer(answer, "one more\n", "done", None)
    page = export.to_html(store.load(conversation), {})
    assert '<span class="rejected">.↵</span>' in page
    assert '<span class="resampled"> more\n</span>' in page


def test_regenerate_forgets_the_last_exchange(tmp_path):
    store = HistoryStore(tmp_path / "h.sqlite3")
    conversation = store.new_conversation("t")
    store.add_user_turn(conversation, "one")
    store.finish_answer(store.start_answer(conversation, ""), "first", "done", None)
    user = store.add_user_turn(conversation, "two")
    store.finish_answer(store.start_answer(conversation, ""), "second", "done", None)
    store.delete_turns_from(user)
    assert [t.text for t in store.load(conversation).turns] == ["one", "first"]
