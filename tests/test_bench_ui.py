"""`python -m devtools bench-ui` cannot rot unseen: the real command runs the real app in a
pseudo-terminal (devtools/ui_bench.py) on the timed scripted pair (devtools/ui_bench_child.py),
one short answer, and prints what it measured."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(sys.platform == "win32", reason="bench-ui drives the app in a POSIX pty")
def test_bench_ui_streams_one_answer_through_the_app_and_reports_the_rate_it_achieved():
    done = subprocess.run([sys.executable, "-m", "devtools", "bench-ui", "--tokens", "300",
                           "--answers", "1", "--no-startup"], cwd=ROOT, env=dict(os.environ),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r"^tokens per answer / answers:\s+300 / 1$", done.stdout, re.MULTILINE)
    achieved = re.search(r"^answer 1: achieved tokens/s:\s+(\d+)$", done.stdout, re.MULTILINE)
    assert achieved and int(achieved.group(1)) > 0, done.stdout
    frames = re.search(r"^answer 1: frames showing new tokens:\s+(\d+)$", done.stdout, re.MULTILINE)
    assert frames and int(frames.group(1)) >= 1, done.stdout
    assert "answer 2" not in done.stdout and not done.stderr.strip()


@pytest.mark.skipif(sys.platform == "win32", reason="bench-ui drives the app in a POSIX pty")
def test_the_terminal_reader_returns_every_byte_of_a_long_stream_once():
    """Megabytes through the pseudo-terminal, as a long bench run writes: the reader returns
    them all, in order (it grows its buffer in place: devtools/ui_bench.py's `drain`)."""
    from devtools.ui_bench import drain, in_pty

    line = "0123456789abcdef" * 4
    count = 60_000  # about 4 MB
    process, master = in_pty([sys.executable, "-c", f"import sys\nfor i in range({count}): "
                              f"sys.stdout.write('%06d{line}\\n' % i)"], dict(os.environ))
    seen = drain(master, lambda _: process.poll() is not None, timeout=60)
    seen += drain(master, lambda _: False, timeout=0.5)  # what was left after the exit
    process.wait()
    os.close(master)
    lines = seen.decode().replace("\r\n", "\n").splitlines()
    assert lines == [f"{i:06d}{line}" for i in range(count)]
