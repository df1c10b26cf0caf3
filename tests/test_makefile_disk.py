"""`make chat` and `make test` stop before an install step the disk cannot hold, with one
line naming the disk and what to do, instead of pip's error halfway through 1.5 GB of part
wheels (the Makefile's check-disk)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def check_disk(venv: Path, need_mb: int) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "check-disk",
                           f"NEED_MB={need_mb}", f"VENV={venv}"],
                          capture_output=True, text=True, timeout=60)


def test_a_step_the_disk_cannot_hold_stops_with_one_line_naming_the_disk(tmp_path):
    done = check_disk(tmp_path / ".venv", 10**12)
    assert done.returncode != 0
    ours = [line for line in done.stderr.splitlines() if line.startswith("specchat:")]
    assert len(ours) == 1 and str(tmp_path) in ours[0] and "VENV=" in ours[0]
    assert re.search(r"and \d+ MB are free", ours[0])


def test_a_step_the_disk_can_hold_goes_on_silently(tmp_path):
    done = check_disk(tmp_path / ".venv", 1)
    assert done.returncode == 0 and done.stderr == ""


@pytest.mark.parametrize("stamp", ["$(STAMP)", "$(QWEN_STAMP)"])
def test_each_install_step_checks_the_disk_before_pip(stamp):
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(rf"^{re.escape(stamp)}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe is not None
    lines = recipe.group(1).splitlines()
    check = next(i for i, line in enumerate(lines) if "check-disk" in line)
    assert check < next(i for i, line in enumerate(lines) if "pip install" in line)
