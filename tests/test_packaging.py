"""Packaging truths (issue 26): every third-party package specchat imports is declared (as a
dependency or in an extra), `requires-python` admits no Python the code cannot run on
(tomllib: 3.11), the version has one source, and the bounds are the versions tested: lower
bounds the tested major (or minor), upper bounds the next minor for the packages whose
private APIs the code uses."""

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


OWN = {"specchat", "devtools"} | {f.stem for folder in ("tests", "scripts")
                                  for f in (ROOT / folder).glob("*.py")}
"""Modules of this repository (a test imports tests/tiny.py or scripts/lookup_bound.py by name)."""
TESTED_WITH = ("test", "llama")
"""The extras whose packages the tests may import: the test extra, and llama.cpp's bindings
(an extra of their own, as they need a compiler; `make test` installs both, and CI fails
without them: tests/ci_strict.py)."""


def imported_packages(*folders: str) -> set[str]:
    """Top-level modules the files under `folders` import (also through pytest.importorskip)
    that are neither the standard library nor this repository's own."""
    names: set[str] = set()
    for file in (path for folder in folders for path in (ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
            elif is_importorskip(node):
                names.add(node.args[0].value.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in OWN}


def is_importorskip(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "importorskip"
            and bool(node.args) and isinstance(node.args[0], ast.Constant))


def declared(extras: tuple[str, ...] | None = None) -> set[str]:
    """The distributions pyproject declares: its dependencies and the `extras` (None: every one)."""
    project = PYPROJECT["project"]
    chosen = project["optional-dependencies"] if extras is None else {
        name: project["optional-dependencies"][name] for name in extras}
    texts = project["dependencies"] + [r for extra in chosen.values() for r in extra]
    return {normalized(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) for r in texts}


def undeclared(modules: set[str], names: set[str]) -> set[str]:
    """The modules that no distribution among `names` provides."""
    distributions = importlib.metadata.packages_distributions()
    return {module for module in modules
            if not {normalized(d) for d in distributions.get(module, [module])} & names}


def test_every_imported_package_is_declared():
    assert undeclared(imported_packages("specchat"), declared()) == set()


def test_every_package_the_tests_and_developer_tools_import_is_declared_for_the_tests():
    imported = imported_packages("tests", "devtools")
    assert {"pytest", "aiohttp", "packaging", "psutil"} <= imported  # importorskip'd ones too
    assert undeclared(imported, declared(TESTED_WITH)) == set()


def test_the_import_check_sees_an_importorskip_and_ignores_the_repositorys_own(tmp_path,
                                                                             monkeypatch):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "import pytest\nfrom tiny import build_model\nfrom specchat import paths\n"
        "psutil = pytest.importorskip('psutil')\nsel = pytest.importorskip('selenium.webdriver')\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert imported_packages("tests") == {"pytest", "psutil", "selenium"}
    assert undeclared({"psutil", "pytest"}, {"pytest"}) == {"psutil"}


def test_requires_python_admits_no_python_without_tomllib():
    assert PYPROJECT["project"]["requires-python"].replace(" ", "").startswith(">=3.11")


def test_the_version_has_one_source():
    assert "version" not in PYPROJECT["project"] and "version" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["hatch"]["version"]["path"] == "specchat/__init__.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+", specchat.__version__)


MINOR_BOUNDED = {"torch"}
"""Packages bounded at the tested minor though past 1.0 (their minors break APIs)."""
UPPER_BOUNDED = {"torch", "transformers"}
"""Packages whose private APIs the code uses (torch._weight_int8pack_mm, torch.ops.mkldnn,
torch.ops.quantized and _make_per_channel_quantized_tensor; transformers' cache and Llama
module internals): bounded below the minor after the one tested."""


def requirements() -> list[str]:
    project = PYPROJECT["project"]
    return project["dependencies"] + [r for extra in project["optional-dependencies"].values()
                                      for r in extra]


def test_lower_bounds_are_the_tested_majors():
    from packaging.requirements import Requirement
    from packaging.version import Version

    off = []
    for text in requirements():
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


def upper_bound_problems(texts: list[str], installed: dict[str, str]) -> list[str]:
    """What is wrong with the upper bounds of UPPER_BOUNDED packages among `texts`, given the
    installed (tested) versions: a bound missing, one the tested version does not satisfy,
    or one that is not the next minor after the tested one (so that a version nobody ran the
    tests on cannot install, and moving to a new one means moving the bound)."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    problems = []
    for text in texts:
        requirement = Requirement(text)
        name = normalized(requirement.name)
        if name not in UPPER_BOUNDED or name not in installed:
            continue
        tested = Version(installed[name])
        ceilings = [Version(s.version) for s in requirement.specifier if s.operator == "<"]
        wanted = Version(f"{tested.major}.{tested.minor + 1}")
        if ceilings != [wanted] or not requirement.specifier.contains(tested):
            problems.append(f"{text} (tested: {tested}; wanted <{wanted})")
    return problems


def test_packages_used_through_private_apis_are_bounded_at_the_next_minor_after_the_tested():
    installed = {normalized(name): importlib.metadata.version(name) for name in UPPER_BOUNDED}
    texts = requirements()
    assert {normalized(t.split(">")[0].split("<")[0]) for t in texts} >= UPPER_BOUNDED
    assert upper_bound_problems(texts, installed) == []


def test_the_upper_bound_check_sees_a_missing_a_loose_and_an_outgrown_bound():
    tested = {"torch": "2.13.0+cpu", "transformers": "5.24.0"}
    assert upper_bound_problems(["torch>=2.13,<2.14", "transformers>=5,<5.25"], tested) == []
    assert upper_bound_problems(["torch>=2.13"], tested) == [
        "torch>=2.13 (tested: 2.13.0+cpu; wanted <2.14)"]
    assert len(upper_bound_problems(["transformers>=5,<6"], tested)) == 1
    assert len(upper_bound_problems(["torch>=2.13,<2.14"], {"torch": "2.14.1"})) == 1
    assert upper_bound_problems(["numpy>=2"], tested) == []  # no private API: no ceiling asked
