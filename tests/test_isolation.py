"""No fixture, whatever its scope, reads or writes the user's own folders (conftest.py):
a module-scoped fixture runs before the per-test isolation, so it needs its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import shared_cache_dir


@pytest.fixture(scope="module")
def module_fixture_environment() -> dict[str, str | None]:
    return {name: os.environ.get(f"SPECCHAT_{name}_DIR") for name in ("CACHE", "CONFIG", "DATA")}


def test_a_module_scoped_fixture_sees_the_shared_test_cache_and_folders_of_the_run(
        module_fixture_environment, tmp_path_factory):
    assert module_fixture_environment["CACHE"] == str(shared_cache_dir())
    run_folder = tmp_path_factory.getbasetemp()
    for name in ("CONFIG", "DATA"):
        assert run_folder in Path(module_fixture_environment[name] or "/").parents
