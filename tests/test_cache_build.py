"""The user cache drops what no key can reach any more: a folder whose source file is gone
or changed goes when a sibling is built, as does a staging folder a killed build left; a
folder whose source is still in place stays (models/config/cache_build.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from specchat.models.config.cache_build import ABANDONED_AFTER_S, STAGING_PREFIX
from specchat.models.gguf.cache import remembered


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SPECCHAT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "facts"


def model_file(root: Path, name: str, content: bytes = b"GGUF weights") -> Path:
    path = root / name / "model.gguf"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def folders(cache: Path) -> list[str]:
    return sorted(folder.name for folder in cache.iterdir())


def test_a_folder_whose_model_file_is_gone_goes_when_the_next_is_built(cache, tmp_path):
    old = model_file(tmp_path, "old-env")
    remembered(old, "digest", lambda: "a")
    [old_folder] = folders(cache)
    old.unlink()  # the environment that held it was removed
    remembered(model_file(tmp_path, "new-env"), "digest", lambda: "a")
    assert len(folders(cache)) == 1 and old_folder not in folders(cache)


def test_a_folder_whose_model_file_changed_goes_when_the_next_is_built(cache, tmp_path):
    path = model_file(tmp_path, "env")
    assert remembered(path, "digest", lambda: "first") == "first"
    [old_folder] = folders(cache)
    path.write_bytes(b"other GGUF weights, a new size")  # reinstalled in place
    assert remembered(path, "digest", lambda: "second") == "second"
    assert len(folders(cache)) == 1 and old_folder not in folders(cache)


def test_a_folder_whose_model_file_is_still_in_place_stays(cache, tmp_path):
    remembered(model_file(tmp_path, "one-env"), "digest", lambda: "a")
    remembered(model_file(tmp_path, "other-env"), "digest", lambda: "a")
    assert len(folders(cache)) == 2


def test_another_models_folder_waits_for_that_models_next_build(cache, tmp_path):
    """Only the same model's folders are read, so a build in a folder of hundreds stays quick."""
    gone = model_file(tmp_path, "old-env")
    remembered(gone, "digest", lambda: "a")
    [gone_folder] = folders(cache)
    gone.unlink()
    other = tmp_path / "env" / "other.gguf"
    other.parent.mkdir()
    other.write_bytes(b"other weights")
    remembered(other, "digest", lambda: "b")
    assert gone_folder in folders(cache) and len(folders(cache)) == 2


def test_a_folder_built_before_sources_were_recorded_stays(cache, tmp_path):
    old = model_file(tmp_path, "old-env")
    remembered(old, "digest", lambda: "a")
    [old_folder] = folders(cache)
    (cache / old_folder / "specchat-sources.json").unlink()
    old.unlink()
    remembered(model_file(tmp_path, "new-env"), "digest", lambda: "a")
    assert old_folder in folders(cache) and len(folders(cache)) == 2


def test_a_staging_folder_a_killed_build_left_goes_after_a_day_and_a_fresh_one_stays(cache,
                                                                                    tmp_path):
    cache.mkdir(parents=True)
    killed, under_way = cache / f"{STAGING_PREFIX}killed", cache / f"{STAGING_PREFIX}under-way"
    for folder in (killed, under_way):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"half written")
    day_ago = time.time() - ABANDONED_AFTER_S - 60
    os.utime(killed, (day_ago, day_ago))
    remembered(model_file(tmp_path, "env"), "digest", lambda: "a")
    assert not killed.exists() and under_way.exists()


def test_a_full_disk_while_building_is_one_line_naming_the_folder_and_leaves_no_staging(cache,
                                                                                       tmp_path):
    import errno

    from specchat.errors import DiskFull

    def full() -> str:
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(DiskFull) as raised:
        remembered(model_file(tmp_path, "env"), "digest", full)
    message = str(raised.value)
    assert "\n" not in message and str(cache) in message and "disk is full" in message
    assert "specchat locate cache" in message and folders(cache) == []
