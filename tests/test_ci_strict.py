"""In CI a missing requirement fails the run (tests/ci_strict.py): a pytest run on small test
modules, with and without CI=true, in a fresh process that loads only that plugin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

MODULES = {
    "test_module_level.py": 'import pytest\npytest.importorskip("no_such_module_for_ci_strict")\n\n'
                            "def test_never_collected():\n    pass\n",
    "test_in_a_test.py": "import pytest\n\ndef test_imports_inside():\n    pytest.importorskip("
                         '"no_such_module_for_ci_strict", reason="extra X")\n',
    "test_marked.py": "import pytest\n\n@pytest.mark.required_in_ci(when=True)\n"
                      '@pytest.mark.skipif(True, reason="no fbgemm here")\n'
                      "def test_required():\n    pass\n\n"
                      "@pytest.mark.required_in_ci(when=False)\n"
                      '@pytest.mark.skipif(True, reason="not this machine")\n'
                      "def test_elsewhere():\n    pass\n",
    "test_plain.py": 'import pytest\n\ndef test_gpu_only():\n    pytest.skip("no CUDA")\n\n'
                     "def test_passes():\n    pass\n",
}


def run_pytest(folder: Path, ci: str | None, *more: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "ci_strict",
                           "-p", "no:cacheprovider", "-q", "-rA", "--rootdir", str(folder),
                           *more, str(folder)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def modules(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ci-strict")
    for name, text in MODULES.items():
        (folder / name).write_text(text)
    return folder


def test_outside_ci_a_missing_package_only_skips(modules):
    done = run_pytest(modules, None)
    assert done.returncode == 0, done.stdout
    assert "1 passed, 5 skipped" in done.stdout


def test_in_ci_a_module_skipping_for_a_missing_package_stops_the_run_at_collection(modules):
    done = run_pytest(modules, "true")
    assert done.returncode != 0 and "Interrupted: 1 error during collection" in done.stdout
    assert "CI=true:" in done.stdout and "no_such_module_for_ci_strict" in done.stdout


def test_in_ci_a_missing_package_or_a_required_test_skipping_fails_the_run(modules):
    done = run_pytest(modules, "true", "--continue-on-collection-errors")
    assert done.returncode != 0, done.stdout
    out = done.stdout
    assert "ERROR test_module_level.py" in out  # a module-level importorskip: a collection error
    assert "FAILED test_in_a_test.py::test_imports_inside" in out and "extra X" in out
    assert "ERROR test_marked.py::test_required" in out and "no fbgemm here" in out
    assert "SKIPPED [1] test_marked.py" in out and "not this machine" in out  # when=False
    assert "no CUDA" in out and "PASSED test_plain.py::test_passes" in out  # plain skips stay
    assert out.count("CI=true:") >= 3


def test_ci_false_is_not_ci(modules):
    assert run_pytest(modules, "false").returncode == 0
