"""No function of the package is left that nothing calls (issue 38 found seven): every
function, method and property defined in specchat/ is named somewhere else in specchat/,
tests/, scripts/ or the developer tools (devtools/). Names the frameworks call are exempt: Textual's handlers and hooks
(`on_*`, `action_*`, `watch_*`, `compose`, the overrides in FRAMEWORK_HOOKS), Python's dunders,
and click commands (registered by their decorator)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("specchat", "tests", "scripts", "devtools")
HOOK = re.compile(r"^(on_|action_|watch_|compute_|validate_)|^__\w+__$|^compose$")
FRAMEWORK_HOOKS = {"get_theme_variable_defaults", "get_default_screen", "discover", "can_replace"}
"""Textual's App, command Provider and Message overrides: Textual calls them by name."""


def word_counts(texts: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for text in texts:
        for word in re.findall(r"\w+", text):
            counts[word] = counts.get(word, 0) + 1
    return counts


def is_click_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("command" in ast.unparse(d) or "group" in ast.unparse(d) for d in node.decorator_list)


def uncalled(package: Path, texts: list[str]) -> list[str]:
    """`file:line name` of each function in `package` whose name appears nowhere else."""
    counts = word_counts(texts)
    found = []
    for file in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            exempt = HOOK.match(node.name) or node.name in FRAMEWORK_HOOKS or is_click_command(node)
            if not exempt and counts.get(node.name, 0) <= 1:
                found.append(f"{file.relative_to(package.parent)}:{node.lineno} {node.name}")
    return found


def test_every_function_of_the_package_is_called_somewhere():
    texts = [f.read_text() for folder in FOLDERS for f in (ROOT / folder).rglob("*.py")]
    assert uncalled(ROOT / "specchat", texts) == []


def test_the_finder_sees_a_function_nothing_calls(tmp_path):
    package = tmp_path / "specchat"
    package.mkdir()
    source = ("import click\n\n@click.command()\ndef cli(): helper()\n\n"
              "def helper(): ...\n\ndef orphan(): ...\n\ndef on_mount(): ...\n")
    (package / "m.py").write_text(source)
    assert uncalled(package, [source]) == ["specchat/m.py:8 orphan"]
