"""The command line and the benchmarks say what their functions take: at least 90% of the
functions with arguments in specchat/commands/ and specchat/bench/ annotate every one
(issue 25; the rest of the package was at 77-92%)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "specchat"


def annotated_share(folder: Path) -> tuple[float, list[str]]:
    """(share of functions with arguments whose arguments are all annotated, the others)."""
    total, bare = 0, []
    for file in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            args = [a for a in args if a.arg not in ("self", "cls")]
            args += [a for a in (node.args.vararg, node.args.kwarg) if a]
            if args:
                total += 1
                if any(a.annotation is None for a in args):
                    bare.append(f"{file.name}:{node.lineno} {node.name}")
    return (1 - len(bare) / total if total else 1.0), bare


@pytest.mark.parametrize("room", ["commands", "bench"])
def test_nine_in_ten_functions_annotate_their_arguments(room):
    share, bare = annotated_share(PACKAGE / room)
    assert share >= 0.9, bare


def test_the_share_counts_an_unannotated_argument(tmp_path):
    (tmp_path / "m.py").write_text("def a(x: int, y): ...\ndef b(x: int): ...\ndef c(): ...\n")
    share, bare = annotated_share(tmp_path)
    assert share == 0.5 and [b.split()[-1] for b in bare] == ["a"]
