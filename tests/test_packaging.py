"""Packaging truths (issue 26): every third-party package specchat imports is declared (as a
dependency or in an extra), `requires-python` admits no Python the code cannot run on
(tomllib: 3.11), and the version has one source."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import specchat

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_packages() -> set[str]:
    """Top-level modules specchat imports that are neither the standard library nor its own."""
    names: set[str] = set()
    for file in (ROOT / "specchat").rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "specchat"}


def declared() -> set[str]:
    project = PYPROJECT["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values()
                                              for r in extra]
    return {normalized(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) for r in requirements}


def test_every_imported_package_is_declared():
    distributions = importlib.metadata.packages_distributions()
    missing = {module for module in imported_packages()
               if not {normalized(d) for d in distributions.get(module, [module])} & declared()}
    assert missing == set()


def test_requires_python_admits_no_python_without_tomllib():
    assert PYPROJECT["project"]["requires-python"].replace(" ", "").startswith(">=3.11")


def test_the_version_has_one_source():
    assert "version" not in PYPROJECT["project"] and "version" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["hatch"]["version"]["path"] == "specchat/__init__.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+", specchat.__version__)


MINOR_BOUNDED = {"torch"}
"""Packages bounded at the tested minor though past 1.0 (their minors break APIs)."""


def test_lower_bounds_are_the_tested_majors():
    from packaging.requirements import Requirement
    from packaging.version import Version

    project = PYPROJECT["project"]
    off = []
    for text in project["dependencies"] + [r for extra in project["optional-dependencies"].values()
                                           for r in extra]:
        requirement = Requirement(text)
        floors = [Version(spec.version) for spec in requirement.specifier if spec.operator == ">="]
        try:
            installed = Version(importlib.metadata.version(requirement.name))
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed here (bitsandbytes): nothing tested to compare with
        if not floors:
            assert requirement.specifier.contains(installed), text
            continue
        floor = floors[0]
        same_minor = installed.major == 0 or normalized(requirement.name) in MINOR_BOUNDED
        wanted = installed.release[:2] if same_minor else installed.release[:1]
        if floor.release[:len(wanted)] != wanted or not requirement.specifier.contains(installed):
            off.append(f"{text} (tested: {installed})")
    assert off == []
