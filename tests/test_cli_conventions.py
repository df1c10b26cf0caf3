"""The command-line conventions of issue 26, item 4: the default command takes the chat's
--pair, --theme and -k; `pairs --json`; `specchat history` lists, shows and exports like
`llm logs`; shell completion; a log file with the versions, the backend choice and errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from specchat.cli import main
from specchat.history.store import HistoryStore, SavedToken

ROOT = Path(__file__).resolve().parent.parent


def invoke(*args: str, **options):
    return CliRunner().invoke(main, list(args), **options)


@pytest.fixture
def opened_chats(monkeypatch):
    """The chats `specchat` would open: their pair, theme and k, instead of a terminal app."""
    import specchat.commands.chat as chat_command

    opened = []

    class NoHistory:
        def unsaved_note(self):
            return None

    class NoTerminal:
        return_code = 0
        history = NoHistory()

        def run(self):
            pass

    def build_app(catalog, first, theme, *rest, **options):
        opened.append({"pair": first.name, "theme": theme, "k": first.k})
        return NoTerminal()

    monkeypatch.setattr(chat_command, "build_app", build_app)
    monkeypatch.setattr(chat_command, "leave", lambda code, note=None: None)
    return opened


def test_the_default_command_opens_the_chat_on_the_given_pair_theme_and_k(tiny_config, opened_chats):
    result = invoke("--config", str(tiny_config), "--pair", "tiny-ngram", "--theme",
                    "specchat-light", "-k", "3")
    assert result.exit_code == 0, result.output
    assert opened_chats == [{"pair": "tiny-ngram", "theme": "specchat-light", "k": 3}]


def test_the_default_command_checks_its_options_like_chat_does(tiny_config, opened_chats):
    unknown = invoke("--config", str(tiny_config), "--pair", "nope")
    assert unknown.exit_code == 2 and "unknown pair 'nope'" in unknown.output
    too_long = invoke("--config", str(tiny_config), "-k", "99")
    assert too_long.exit_code == 2 and "-k" in too_long.output
    assert opened_chats == []


def test_chat_options_before_another_command_say_where_they_go(tiny_config):
    taken = invoke("--pair", "tiny", "run", "hi")
    assert taken.exit_code == 2
    assert "give it after the command: specchat run --pair ..." in taken.output
    not_taken = invoke("--pair", "tiny", "pairs")
    assert not_taken.exit_code == 2
    assert "specchat pairs --pair" not in not_taken.output
    assert "`specchat pairs` has no --pair" in not_taken.output
    assert "(chat, run, serve)" in not_taken.output
    for command in ("chat", "run", "serve"):  # the hint names only commands that take it
        assert "--pair" in invoke(command, "--help").output


def test_locate_config_prints_the_folder_that_holds_models_toml_and_keymap_toml(tmp_path):
    folder = Path(invoke("locate", "config").output.strip())
    assert folder == tmp_path / "config"
    from specchat import paths
    from specchat.tui.keymap import keymap_file

    assert paths.user_models_file().parent == folder and keymap_file().parent == folder


def test_pairs_json_lists_every_pair_with_its_models_availability(tiny_config):
    result = invoke("pairs", "--config", str(tiny_config), "--json")
    assert result.exit_code == 0, result.output
    records = {record["name"]: record for record in json.loads(result.stdout)}
    assert {"tiny", "tiny-ngram", "tiny-plain"} <= set(records)
    assert records["tiny-ngram"]["drafter"] == "ngram"
    assert records["tiny-plain"]["drafter"] == "none" and "draft" not in records["tiny-plain"]["models"]
    target = records["tiny"]["models"]["target"]
    assert target["available"] is True and Path(target["where"]).exists()
    assert sum(record["default"] for record in records.values()) == 1


def saved_history(folder: Path) -> Path:
    """Two conversations: an older one with an answer (one rejected draft) and a newer one."""
    path = folder / "history.sqlite3"
    store = HistoryStore(path)
    first = store.new_conversation("Sea poem", "tiny")
    store.add_user_turn(first, "Write about the sea")
    answer = store.start_answer(first, "speculative k=2")
    store.append_tokens(answer, [SavedToken("Waves", "accepted", 1), SavedToken(" ghost", "rejected", 2),
                                 SavedToken(" roll", "resampled", 3), SavedToken(".", "bonus", 4)])
    store.finish_answer(answer, "Waves roll.", "done", {"tokens_per_s": 12.5, "acceptance_rate": 0.5,
                                                         "mean_acceptance_length": 2.0})
    second = store.new_conversation("Later question", "tiny-plain")
    store.add_user_turn(second, "What is 2+2?")
    store.close()
    return path


def test_history_lists_the_newest_conversations_first(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCHAT_DATA_DIR", str(tmp_path))
    saved_history(tmp_path)
    listed = invoke("history")
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    assert "Later question" in lines[0] and "Sea poem" in lines[1] and "1 answers" in lines[1]
    rows = json.loads(invoke("history", "list", "--json", "-n", "1").stdout)
    assert [row["title"] for row in rows] == ["Later question"]


def test_history_show_prints_the_committed_text_and_export_writes_the_coloured_page(tmp_path):
    path = saved_history(tmp_path)
    shown = invoke("history", "show", "1", "--history-file", str(path))
    assert shown.exit_code == 0, shown.output
    assert "Waves roll." in shown.stdout and "ghost" not in shown.stdout
    tokens = json.loads(invoke("history", "show", "1", "--json", "--history-file", str(path)).stdout)
    assert [t["kind"] for t in tokens["turns"][1]["tokens"]] == ["accepted", "rejected", "resampled",
                                                                "bonus"]
    page = tmp_path / "sea.html"
    exported = invoke("history", "--history-file", str(path), "export", "1", "-o", str(page))
    assert exported.exit_code == 0, exported.output
    html = page.read_text()
    assert '<span class="rejected"> ghost</span>' in html and ".accepted{color:#" in html
    assert "Later question" in invoke("history", "show", "last", "--history-file", str(path)).stdout


@pytest.mark.parametrize("args, fragment", [
    (["show", "7"], "no conversation 7 in"),
    (["show", "seven"], "conversation id must be a number or 'last'"),
    (["export", "1", "--format", "html", "--theme", "nope"], "unknown theme 'nope'"),
])
def test_history_mistakes_are_one_line_errors(tmp_path, args, fragment):
    path = saved_history(tmp_path)
    result = invoke("history", args[0], *args[1:], "--history-file", str(path))
    assert result.exit_code == 2 and fragment in result.output
    assert "Traceback" not in result.output


def test_history_export_into_a_missing_folder_is_refused_and_creates_nothing(tmp_path):
    """Issue 40: it created the whole folder tree, where `bench --html` refuses the mistake."""
    path = saved_history(tmp_path)
    page = tmp_path / "no" / "such" / "x.html"
    result = invoke("history", "export", "1", "-o", str(page), "--history-file", str(path))
    assert result.exit_code == 2 and result.output.splitlines() == [
        f"specchat: error: -o {page}: folder {page.parent} does not exist: create it first, "
        "or write somewhere else"]
    assert not (tmp_path / "no").exists()


def test_history_without_a_file_or_with_a_newer_one_names_the_file(tmp_path):
    missing = invoke("history", "--history-file", str(tmp_path / "none.sqlite3"))
    assert missing.exit_code == 2 and "no history file at" in missing.output
    newer = saved_history(tmp_path)
    import sqlite3

    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version = 99")
    result = invoke("history", "--history-file", str(newer))
    assert result.exit_code == 2 and "newer than this specchat's" in result.output


def specchat_process(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specchat", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), **env))


def test_shell_completion_completes_commands_and_pair_names(tiny_config):
    script = specchat_process(env={"_SPECCHAT_COMPLETE": "bash_source"})
    assert "complete -o nosort -F _specchat_completion specchat" in script.stdout
    pairs = specchat_process(env={"_SPECCHAT_COMPLETE": "bash_complete",
                                  "COMP_WORDS": f"specchat --config {tiny_config} --pair tiny-",
                                  "COMP_CWORD": "4"})
    assert {"plain,tiny-ngram", "plain,tiny-plain"} <= set(pairs.stdout.split())
    commands = specchat_process(env={"_SPECCHAT_COMPLETE": "bash_complete",
                                     "COMP_WORDS": "specchat hist", "COMP_CWORD": "1"})
    assert commands.stdout.split() == ["plain,history"]


def test_the_log_file_holds_versions_the_backend_choice_and_errors(tmp_path, tiny_config):
    env = {"SPECCHAT_LOG_DIR": str(tmp_path / "logs")}
    located = specchat_process("locate", "logs", env=env)
    log = Path(located.stdout.strip())
    assert log == tmp_path / "logs" / "specchat.log"
    answered = specchat_process("run", "--config", str(tiny_config), "--pair", "tiny",
                                "--max-new-tokens", "3", "hello", env=env)
    assert answered.returncode == 0, answered.stderr
    failed = specchat_process("run", "--config", str(tiny_config), "--pair", "nope", "hi", env=env)
    assert failed.returncode == 2
    text = log.read_text()
    from specchat import __version__

    assert f"specchat {__version__} python " in text and " textual " in text
    assert "pair tiny: target torch (lean)" in text and "backend choice: auto:" in text
    assert "ERROR specchat.cli: error shown to the user: unknown pair 'nope'" in text
    assert "Traceback" not in failed.stderr


def test_the_log_file_rotates_and_never_stops_a_command(tmp_path, monkeypatch):
    import logging

    from specchat import logs

    monkeypatch.setattr(logs, "MAX_BYTES", 400)
    monkeypatch.setenv("SPECCHAT_LOG_DIR", str(tmp_path / "logs"))
    logger = logging.getLogger("specchat")
    before = list(logger.handlers)
    try:
        for _ in range(2):
            logs.start_logging(["specchat", "test"])
        for n in range(20):
            logging.getLogger("specchat.test").info("line %d of a long enough record", n)
        assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
            "specchat.log", "specchat.log.1", "specchat.log.2", "specchat.log.3"]
    finally:
        for handler in logger.handlers[len(before):]:
            handler.close()
        logger.handlers[:] = before
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("SPECCHAT_LOG_DIR", str(blocked / "logs"))
    assert logs.start_logging(["specchat"]) is None


@pytest.mark.parametrize("args, logged", [
    (["run", "--help"], None), (["pairs", "-h"], None), (["--version"], None),
    (["run", "--bogus", "hi"], "usage error shown to the user: No such option '--bogus'"),
    (["locate", "nowhere"], "usage error shown to the user: Invalid value for"),
])
def test_help_and_usage_errors_are_not_logged_as_unexpected(tmp_path, monkeypatch, args, logged):
    import logging

    monkeypatch.setenv("SPECCHAT_LOG_DIR", str(tmp_path / "logs"))
    logger = logging.getLogger("specchat")
    before = list(logger.handlers)
    try:
        result = invoke(*args)
    finally:
        for handler in logger.handlers[len(before):]:
            handler.close()
        logger.handlers[:] = before
    assert result.exit_code == (2 if logged else 0), result.output
    log = tmp_path / "logs" / "specchat.log"
    text = log.read_text() if log.exists() else ""
    assert "unexpected error" not in text and "Traceback" not in text, text
    if logged:
        assert f"INFO specchat.cli: {logged}" in text, text
