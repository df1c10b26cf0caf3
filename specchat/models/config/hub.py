"""Models on the Hugging Face hub: read from the local cache, downloaded only where the hub answers.

Three reference forms reach here (models/config/refs.py parses them):
- `hf:OWNER/REPO/FILE.gguf`: that one file;
- `hf:OWNER/REPO`: a transformers folder, with only the files a model needs (config,
  tokenizer files, `*.safetensors` and their index);
- a bare hub id `OWNER/REPO`: the whole snapshot, as transformers would fetch it.

The cache is read first and offline (huggingface_hub's layout:
`models--OWNER--REPO/snapshots/REV/...`, `refs/main`), so a model once downloaded never
waits for the network. Only on a miss is the hub asked, and only after `hub_reachable`
answered within a second and a half: an unreachable hub is a one-line error, never a hang.
Knows nothing about loading models.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable

from specchat.errors import ModelNotFound, one_line

Progress = Callable[[str], None]

MODEL_FILES = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
               "tokenizer.model", "special_tokens_map.json", "vocab.json", "merges.txt",
               "added_tokens.json", "chat_template.jinja", "*.safetensors",
               "model.safetensors.index.json"]
"""What `hf:OWNER/REPO` fetches: enough for transformers to load the model, no other weights
(no .bin, .gguf, .onnx or original checkpoints)."""
REACH_TIMEOUT = 1.5
"""Seconds `hub_reachable` waits for huggingface.co (name lookup included)."""


def hub_reachable(timeout: float = REACH_TIMEOUT) -> bool:
    """True when the Hugging Face hub answers within `timeout` and offline mode is off. The
    lookup runs in a thread so that a name server that never answers cannot hold us."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    answer: list[bool] = []
    probe = threading.Thread(target=lambda: answer.append(_connects(timeout)), daemon=True)
    probe.start()
    probe.join(timeout)
    return bool(answer and answer[0])


def _connects(timeout: float) -> bool:
    import socket

    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def cache_dir() -> Path:
    """huggingface_hub's cache (HF_HUB_CACHE, HF_HOME/hub or ~/.cache/huggingface/hub)."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def hub_snapshot(repo_id: str) -> Path | None:
    """The local cache folder of a hub model, or None if it was never downloaded."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, local_files_only=True, cache_dir=cache_dir()))
    except Exception:  # noqa: BLE001 - any failure means "not in the cache"
        return None


def hub_folder(repo_id: str, progress: Progress = lambda _: None) -> Path:
    """A bare hub id's whole snapshot, from the cache or downloaded where reachable."""
    snapshot = hub_snapshot(repo_id)
    if snapshot is not None:
        return snapshot
    if not hub_reachable():
        raise ModelNotFound(f"model '{repo_id}' is not in the local Hugging Face cache and the hub "
                            "is unreachable: download it where there is network, or use a local "
                            "folder or .gguf file")
    progress(f"downloading {repo_id}")
    from huggingface_hub import snapshot_download

    return Path(fetch(lambda: snapshot_download(repo_id, cache_dir=cache_dir()), repo_id))


def split_file_ref(value: str) -> tuple[str, str]:
    """("OWNER/REPO", "path/in/repo.gguf") of `OWNER/REPO/path/in/repo.gguf`."""
    owner, repo, filename = value.split("/", 2)
    return f"{owner}/{repo}", filename


def cached_file(value: str) -> Path | None:
    """The cached copy of `OWNER/REPO/FILE`, or None; never touches the network."""
    from huggingface_hub import try_to_load_from_cache

    repo, filename = split_file_ref(value)
    found = try_to_load_from_cache(repo, filename, cache_dir=cache_dir())
    return Path(found) if isinstance(found, str) and Path(found).is_file() else None


def hub_file(value: str, progress: Progress = lambda _: None) -> Path:
    """The file `OWNER/REPO/FILE` from the cache, or downloaded where the hub is reachable."""
    found = cached_file(value)
    if found is not None:
        return found
    repo, filename = split_file_ref(value)
    unreachable(f"hf:{value}")
    progress(f"downloading {filename} from {repo}")
    from huggingface_hub import hf_hub_download

    return Path(fetch(lambda: hf_hub_download(repo, filename, cache_dir=cache_dir()), f"hf:{value}"))


def cached_model_folder(repo: str) -> Path | None:
    """The cached snapshot of `OWNER/REPO` if it holds a loadable model (a config.json and
    its safetensors weights), or None."""
    folder = hub_snapshot(repo)
    if folder is None or not (folder / "config.json").is_file():
        return None
    return folder if any(folder.glob("*.safetensors")) else None


def hub_model_folder(repo: str, progress: Progress = lambda _: None) -> Path:
    """`OWNER/REPO`'s model files (MODEL_FILES) from the cache, or downloaded where reachable."""
    found = cached_model_folder(repo)
    if found is not None:
        return found
    unreachable(f"hf:{repo}")
    progress(f"downloading the model files of {repo}")
    from huggingface_hub import snapshot_download

    folder = Path(fetch(lambda: snapshot_download(repo, allow_patterns=MODEL_FILES,
                                                  cache_dir=cache_dir()), f"hf:{repo}"))
    if not any(folder.glob("*.safetensors")):
        raise ModelNotFound(f"hf:{repo} has no safetensors weights: name one of its .gguf files "
                            f"(hf:{repo}/FILE.gguf) or convert it")
    return folder


def unreachable(ref: str) -> None:
    """A one-line error for a reference missing from the cache while the hub cannot be reached."""
    if not hub_reachable():
        raise ModelNotFound(f"{ref} is not in the local Hugging Face cache ({cache_dir()}) and the "
                            "hub is unreachable: download it where there is network "
                            "(huggingface-cli download), or use a local file")


def fetch(download: Callable[[], str], ref: str) -> str:
    """`download()`, with the hub's errors (unknown repo or file, no access) as one line."""
    try:
        return download()
    except Exception as error:  # noqa: BLE001 - huggingface_hub raises many kinds
        detail = one_line(error, 200)
        raise ModelNotFound(f"{ref} cannot be downloaded ({detail}): check the owner, repository "
                            "and file name on huggingface.co") from None
