"""`specchat run`'s input and interruption (issues 24 and 26): a prompt piped on stdin is
read without `-`; stdin that is not UTF-8 is read with U+FFFD and said on stderr, before
anything loads; Ctrl-C keeps the text so far on stdout, ends --jsonl with a `done` object
whose stop_reason is "stopped", and exits 130 (a real process and a real SIGINT); SIGTERM
does the same and exits 143 (issue 40: it ended at once, with no statistics and no `done`)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from specchat.cli import main
from specchat.commands.run import read_prompt
from specchat.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent


def test_a_prompt_piped_on_stdin_needs_no_dash(tiny_config):
    result = CliRunner().invoke(main, ["run", "--config", str(tiny_config), "--jsonl",
                                       "--max-new-tokens", "4"], input="hello from a pipe")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[-1])["type"] == "done"


def test_stdin_that_is_not_utf8_is_read_with_replacements_and_said(tiny_config):
    result = CliRunner().invoke(main, ["run", "--config", str(tiny_config), "--max-new-tokens", "4"],
                                input=b"caf\xe9 \xff\xfe ok")
    assert result.exit_code == 0, result.output
    assert "stdin is not valid UTF-8: 3 invalid byte sequence(s)" in result.stderr  # \xe9 \xff \xfe
    assert "Traceback" not in result.output


def test_no_prompt_at_a_terminal_is_a_one_line_usage_error(monkeypatch):
    terminal = io.TextIOWrapper(io.BytesIO(b""))
    terminal.isatty = lambda: True
    monkeypatch.setattr(sys, "stdin", terminal)
    with pytest.raises(UsageError, match="no prompt: pass it as an argument, or pipe it"):
        read_prompt(())


def interrupted_run(tiny_config, *options: str,
                    signum: int = signal.SIGINT) -> tuple[int, str, str]:
    """A real `specchat run` sent `signum` once its first output lines are out."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    process = subprocess.Popen([sys.executable, "-m", "specchat", "run", "--config", str(tiny_config),
                                "--pair", "tiny", "--no-spec", "--max-new-tokens", "100000",
                                *options, "Tell me a long story"], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    # unbuffered: communicate() reads the pipe itself, so bytes a buffered reader had
    # taken past the first line would be lost, and with them whole rounds
    first = process.stdout.read(64) if "--jsonl" not in options else process.stdout.readline()
    process.send_signal(signum)
    rest, err = process.communicate(timeout=60)
    return process.returncode, (first + rest).decode("utf-8", "replace"), err.decode()


STOPS = [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")]


@pytest.mark.parametrize("signum, status, said", STOPS, ids=["ctrl-c", "sigterm"])
def test_a_stop_signal_in_jsonl_ends_with_a_stopped_done_object_and_its_exit_status(
        tiny_config, signum, status, said):
    code, out, err = interrupted_run(tiny_config, "--jsonl", signum=signum)
    objects = [json.loads(line) for line in out.splitlines()]
    rounds, done = objects[:-1], objects[-1]
    assert code == status, err
    assert done["type"] == "done" and done["stop_reason"] == "stopped"
    text = "".join(o["accepted_text"] + o["token_text"] for o in rounds)
    # a stop inside a multi-byte character leaves its bytes as U+FFFD, as the token limit does
    assert done["text"].startswith(text) and set(done["text"][len(text):]) <= {"\ufffd"}
    assert 0 < len(rounds) < done["stats"]["tokens"] + 1 and "Traceback" not in err


@pytest.mark.parametrize("signum, status, said", STOPS, ids=["ctrl-c", "sigterm"])
def test_a_stop_signal_keeps_the_text_so_far_on_stdout_and_the_statistics_on_stderr(
        tiny_config, signum, status, said):
    code, out, err = interrupted_run(tiny_config, signum=signum)
    assert code == status and out.strip()
    assert "stop reason:" in err and "stopped" in err
    assert err.rstrip().endswith(f"specchat: {said}: the answer so far is above")
    assert "Traceback" not in err


def run_with_bytes(tiny_config, *arguments: bytes) -> subprocess.CompletedProcess:
    """A real `specchat run` whose command line carries the bytes as given."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "specchat", "run", "--config", str(tiny_config),
                           "--pair", "tiny", "--max-new-tokens", "4", *arguments],
                          cwd=ROOT, env=env, capture_output=True, timeout=300)


def test_a_prompt_argument_that_is_not_utf8_is_read_with_replacements_and_said(tiny_config):
    result = run_with_bytes(tiny_config, b"caf\xe9 ok")
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert b"the prompt is not valid UTF-8: 1 invalid byte sequence(s) read as U+FFFD" in result.stderr
    assert b"Traceback" not in result.stderr and result.stdout.strip()


def test_a_system_prompt_that_is_not_utf8_is_read_with_replacements_and_said(tiny_config):
    result = run_with_bytes(tiny_config, b"--system", b"be \xff\xfe terse", b"hello")
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert b"--system is not valid UTF-8: 2 invalid byte sequence(s)" in result.stderr
    assert b"Traceback" not in result.stderr


@pytest.mark.parametrize("where", ["--config", "user models.toml"])
def test_a_config_file_that_is_not_utf8_is_one_line_naming_it(tmp_path, where):
    from specchat import paths

    config = tmp_path / "models.toml" if where == "--config" else paths.user_models_file()
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_bytes(b'[pairs.x]\ntarget = "caf\xe9"\n')
    arguments = ["--config", str(config)] if where == "--config" else []
    result = CliRunner().invoke(main, ["pairs", *arguments])
    assert result.exit_code == 2, result.output
    assert f"{config}: not UTF-8 text (byte 0xe9 on line 2); save it as UTF-8" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
