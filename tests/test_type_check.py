"""The type check `make test` runs before the tests (pyproject's [tool.mypy]) fails where it
should: an unannotated function in the engine or the chat layer (checked strictly), a wrong
annotation anywhere in the package; and it leaves an unannotated function elsewhere alone
(mypy's defaults). Checked on a throwaway package laid out like specchat, with the
repository's own configuration."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

BARE = "def double(x):\n    return 2 * x\n"
WRONG = "def count() -> int:\n    return 'three'\n"
FINE = "def double(x: int) -> int:\n    return 2 * x\n"
MODULES = {
    "engine/bare.py": BARE, "chat/bare.py": BARE, "history/bare.py": BARE,
    "history/wrong.py": WRONG, "engine/fine.py": FINE,
}


def failing_files(folder: Path) -> set[str]:
    """The files of `folder`'s specchat package that the type check reports an error in."""
    pytest.importorskip("mypy")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(folder / ".mypy_cache"), "specchat"],
        cwd=folder, capture_output=True, text=True, timeout=300)
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 2: mypy itself failed
    return set(re.findall(r"^specchat/(\S+\.py):\d+: error", result.stdout, re.MULTILINE))


@pytest.fixture(scope="module")
def failing(tmp_path_factory) -> set[str]:
    package = tmp_path_factory.mktemp("typed") / "specchat"
    for name, text in MODULES.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
        (package / name).with_name("__init__.py").touch()
    (package / "__init__.py").touch()
    return failing_files(package.parent)


def test_an_unannotated_function_fails_the_check_in_the_engine_and_the_chat_layer(failing):
    assert {"engine/bare.py", "chat/bare.py"} <= failing


def test_outside_the_strict_layers_an_unannotated_function_passes(failing):
    assert "history/bare.py" not in failing


def test_a_wrong_annotation_fails_the_check_outside_the_strict_layers_too(failing):
    assert "history/wrong.py" in failing


def test_an_annotated_engine_function_passes(failing):
    assert "engine/fine.py" not in failing


def test_make_test_type_checks_before_it_runs_the_tests():
    """`make test` is the README's test command and CI's (.ci/run)."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe is not None
    lines = recipe.group(1).splitlines()
    assert lines[0].strip() == "$(TYPECHECK)" and "pytest" in lines[-1]
    assert re.search(r"^TYPECHECK = \$\(BIN\)/python -m mypy$", makefile, re.MULTILINE)
