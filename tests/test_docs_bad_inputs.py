"""docs/bad-inputs.md names, for every bad input, the test that checks it: each one exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def named_tests() -> list[tuple[str, str]]:
    text = (ROOT / "docs" / "bad-inputs.md").read_text()
    return re.findall(r"`(tests/test_\w+\.py)::(test_\w+)`", text)


def test_every_test_the_bad_inputs_table_names_exists():
    named = named_tests()
    assert len(named) >= 25
    missing = [f"{file}::{name}" for file, name in named
               if not re.search(rf"^(async )?def {name}\(", (ROOT / file).read_text(), re.M)]
    assert missing == []
