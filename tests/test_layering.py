"""The dependency rule of DESIGN.md §2, checked on the source's import statements:
engine imports no transformers/textual/click; chat no textual; models no textual;
the TUI no torch/transformers (and its startup pulls in no torch)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "specchat"

FORBIDDEN = {
    "engine": {"transformers", "textual", "click", "gguf", "bitsandbytes", "specchat.models",
               "specchat.chat", "specchat.tui", "specchat.cli", "specchat.commands"},
    "models": {"textual", "click", "specchat.chat", "specchat.tui", "specchat.cli",
               "specchat.commands"},
    "chat": {"textual", "transformers", "click", "specchat.tui", "specchat.cli", "specchat.commands"},
    "tui": {"torch", "transformers", "gguf", "bitsandbytes", "specchat.engine", "specchat.cli",
            "specchat.commands"},
}


def imported_modules(file: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def violations(layer: str) -> list[str]:
    found = []
    for file in sorted((PACKAGE / layer).rglob("*.py")):
        for name in imported_modules(file):
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN[layer]):
                found.append(f"{file.relative_to(PACKAGE)} imports {name}")
    return found


@pytest.mark.parametrize("layer", ["engine", "models", "chat", "tui"])
def test_layer_imports_respect_the_dependency_rule(layer):
    if not (PACKAGE / layer).is_dir():
        pytest.fail(f"specchat/{layer} is missing")
    assert violations(layer) == []


def test_the_checker_sees_a_forbidden_import(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("import torch\nfrom transformers import AutoModel\n")
    assert {"torch", "transformers"} <= imported_modules(bad)


def test_help_and_chat_events_load_without_torch():
    code = ("import sys, specchat.cli, specchat.chat.events; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
