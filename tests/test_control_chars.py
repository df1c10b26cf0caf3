"""Model output is untrusted input (issue 40): an ESC, BEL, CSI, OSC or C1 control in an
answer, a saved conversation or a rejected draft copied from the prompt never reaches a
terminal or a text file raw. `specchat run` (coloured on a terminal, plain otherwise),
`history show|list|export` (Markdown, HTML) and the unsaved copy print them visibly, as
^[ and <U+009B> (specchat/control_chars.py); `--jsonl`, `--json` and the JSON export keep
the exact text, escaped by JSON. Byte for byte, through the command line, with a tiny model
whose tokens are terminal escapes (tests/tiny.py's CONTROL_WORDS)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from specchat.cli import main
from specchat.control_chars import json_text, visible
from specchat.history.store import HistoryStore, SavedToken

ROOT = Path(__file__).resolve().parent.parent
EVIL = "a\x1b]0;PWNED\x07b\x1b[2Jc\x9b31md\x00e\x7ff\rg\th\ni\x85"
"""An OSC that sets the title, a CSI that clears the screen, a C1 CSI, NUL, DEL, CR, then a
tab and a newline (which stay), and a C1 NEL."""
SHOWN = "a^[]0;PWNED^Gb^[[2Jc<U+009B>31md^@e^?f^Mg\th\ni<U+0085>"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Any control character but newline and tab."""


def test_control_characters_are_shown_in_caret_notation_and_c1_by_code_point():
    assert visible(EVIL) == SHOWN
    assert visible("plain text, 日本語 😀\n\tend") == "plain text, 日本語 😀\n\tend"


def test_json_text_keeps_the_exact_text_and_nothing_raw_a_terminal_would_obey():
    dumped = json_text({"text": EVIL})
    assert json.loads(dumped) == {"text": EVIL}
    assert not RAW.search(dumped) and "\\u009b" in dumped and "\\u001b" in dumped


# ----- the history's commands ---------------------------------------------------------------


@pytest.fixture
def evil_history(tmp_path) -> Path:
    """A history file with one conversation whose title, system prompt, question and answer
    (a committed token and a rejected ghost) all carry EVIL."""
    path = tmp_path / "history.sqlite3"
    store = HistoryStore(path)
    conversation = store.new_conversation(EVIL, "pair", system=EVIL)
    store.add_user_turn(conversation, EVIL)
    answer = store.start_answer(conversation, "speculative k=2", "pair")
    store.append_tokens(answer, [SavedToken(EVIL, "accepted", 1), SavedToken(EVIL, "rejected", 2)])
    store.finish_answer(answer, EVIL, "done", None)
    store.close()
    return path


def history(path: Path, *arguments: str):
    result = CliRunner().invoke(main, ["history", *arguments, "--history-file", str(path)])
    assert result.exit_code == 0, result.output
    return result


def test_history_show_prints_the_controls_visibly_byte_for_byte(evil_history):
    out = history(evil_history, "show").stdout
    assert not RAW.search(out)
    assert out.endswith(f"## You\n\n{SHOWN}\n\n## Assistant\n\n{SHOWN}\n\n*speculative k=2*\n")
    assert out.startswith(f"# {SHOWN}\n")  # the title
    assert f"**System:** {SHOWN}\n" in out


def test_history_list_prints_the_title_visibly(evil_history):
    line = history(evil_history, "list").stdout
    assert not RAW.search(line) and line.rstrip("\n").endswith(visible(EVIL[:80]))


def test_history_json_keeps_the_exact_text_escaped(evil_history):
    shown = history(evil_history, "show", "--json").stdout
    listed = history(evil_history, "list", "--json").stdout
    assert not RAW.search(shown) and not RAW.search(listed)
    turns = json.loads(shown)["turns"]
    assert [t["text"] for t in turns] == [EVIL, EVIL]
    assert [t["text"] for t in turns[1]["tokens"]] == [EVIL, EVIL]
    assert json.loads(listed)[0]["title"] == EVIL[:80]


@pytest.mark.parametrize("suffix", ["md", "html", "json"])
def test_history_export_files_hold_no_raw_controls(evil_history, tmp_path, suffix):
    out = tmp_path / f"x.{suffix}"
    history(evil_history, "export", "-o", str(out))
    text = out.read_text(encoding="utf-8")
    assert not RAW.search(text)
    if suffix == "json":
        assert json.loads(text)["turns"][1]["text"] == EVIL
    elif suffix == "md":
        assert f"## Assistant\n\n{SHOWN}\n" in text
    else:  # the C1 controls are shown as text, escaped: never a tag
        assert "c&lt;U+009B&gt;31md" in text and "a^[]0;PWNED^Gb" in text


# ----- specchat run over a model whose tokens are escapes -----------------------------------


@pytest.fixture(scope="module")
def control_config(tmp_path_factory) -> Path:
    from tiny import write_control_pair

    return write_control_pair(tmp_path_factory.mktemp("controls"))


def run_arguments(config: Path, *options: str) -> list[str]:
    return ["run", "--config", str(config), "--max-new-tokens", "30", "--seed", "1", *options,
            "hi"]


@pytest.fixture(scope="module")
def exact_answer(control_config) -> tuple[str, list[dict]]:
    """(the done object's text, the round objects) of `run --jsonl`: the exact text."""
    result = CliRunner().invoke(main, run_arguments(control_config, "--jsonl"))
    assert result.exit_code == 0, result.output
    assert not RAW.search(result.stdout)  # the JSON lines escape every control
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    text = objects[-1]["text"]
    ghosts = "".join(o["rejected_text"] for o in objects[:-1])
    assert "\x1b" in text and RAW.search(ghosts) and re.search("[\x80-\x9f]", text + ghosts)
    return text, objects[:-1]


def test_run_plain_output_shows_the_controls_of_the_answer_visibly(control_config, exact_answer):
    result = CliRunner().invoke(main, run_arguments(control_config))
    assert result.exit_code == 0, result.output
    assert result.stdout == visible(exact_answer[0]) + "\n"


def on_a_terminal(arguments: list[str]) -> bytes:
    """What `specchat` writes to stdout when stdout is a pseudo-terminal (stderr apart)."""
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color", COLUMNS="200")
    env.pop("NO_COLOR", None)
    process = subprocess.Popen([sys.executable, "-m", "specchat", *arguments], stdin=subprocess.DEVNULL,
                               stdout=slave, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    os.close(slave)
    seen = b""
    while True:
        if select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif process.poll() is not None:
            break
    os.close(master)
    assert process.wait(timeout=60) == 0, process.stderr.read()
    return seen


@pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminals as on Linux")
def test_run_coloured_output_shows_the_controls_of_answer_and_ghosts_visibly(control_config,
                                                                           exact_answer):
    seen = on_a_terminal(run_arguments(control_config)).replace(b"\r\n", b"\n")
    colours = re.compile(rb"\x1b\[[0-9;]*m")
    assert colours.search(seen)  # coloured indeed
    shown = "".join(visible(o["accepted_text"]) + visible(o["rejected_text"])
                    + visible(o["token_text"]) for o in exact_answer[1])
    assert colours.sub(b"", seen).decode("utf-8") == shown + "\n"
