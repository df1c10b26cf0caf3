"""Shared fixtures: every test runs with its own config/data/cache folders, and the
tiny random pair (tests/tiny.py) is built once per session. In CI (CI=true) a missing
required package fails the run instead of skipping (tests/ci_strict.py's hooks)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from ci_strict import (pytest_configure, pytest_make_collect_report,  # noqa: E402,F401
                       pytest_runtest_makereport)


def isolate(patch: pytest.MonkeyPatch, root: Path) -> None:
    """Config, history and logs under `root`, the shared model cache, no hub."""
    for name in ("CONFIG", "DATA", "LOG"):
        patch.setenv(f"SPECCHAT_{name}_DIR", str(root / name.lower()))
    patch.setenv("SPECCHAT_CACHE_DIR", str(shared_cache_dir()))
    patch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session", autouse=True)
def isolated_session_dirs(tmp_path_factory):
    """Module- and session-scoped fixtures run before `isolated_dirs`: they are isolated too."""
    with pytest.MonkeyPatch.context() as patch:
        isolate(patch, tmp_path_factory.mktemp("session-dirs"))
        yield


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, monkeypatch):
    """No test reads or writes the user's real config, history or model cache."""
    isolate(monkeypatch, tmp_path)


@pytest.fixture
def one_thread():
    """torch on one thread for the test (tensors of a few entries: one thread is several times
    faster on a shared machine); a module asks for it with `usefixtures("one_thread")`."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def fake_cpu(monkeypatch):
    """fake_cpu(flags): the CPU's flags as every reader of /proc/cpuinfo sees them
    (models/device/hardware.py's `cpu_flags`) for the test."""
    from specchat.models.device import hardware

    def fake(flags: set[str]) -> None:
        monkeypatch.setattr(hardware, "cpu_flags", lambda: set(flags))

    return fake


def shared_cache_dir() -> Path:
    """One model-conversion cache for the whole run, so the built-in GGUF converts once."""
    import tempfile

    folder = Path(tempfile.gettempdir()) / "specchat-test-cache"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def tiny_config(tmp_path_factory) -> Path:
    """models.toml with pairs tiny (1-layer draft), tiny-self, tiny-ngram, tiny-plain."""
    from tiny import write_models_toml

    return write_models_toml(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def load_tiny(tiny_config):
    """load_tiny(name) -> LoadedPair, cached per pair name for the session."""
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    loaded = {}

    def load(name: str = "tiny"):
        if name not in loaded:
            loaded[name] = load_pair(load_catalog(tiny_config).get(name))
        return loaded[name]

    return load
