"""Whether a GGUF file is whole, read from its header alone, before any backend loads it.

A file cut short (an interrupted download or copy) still has its header, and each backend
fails on it in its own words ("unsupported architecture" in llama.cpp, "cannot reshape
array" in the gguf reader). `check_gguf_file` takes the size the tensors need from the
header (header.py, which names a garbage length instead of allocating it: that was a
MemoryError in both backends) and says "truncated or corrupt" with both sizes; both
backends call it first. The words are those of models/torch_backend/safetensors_check.py
for safetensors files (both from specchat/errors.py's `DamagedWeights`, `damaged` and
`check_whole`). Loads no tensor.
"""

from __future__ import annotations

from pathlib import Path

from specchat.errors import DamagedWeights, ModelNotFound, check_whole, damaged
from specchat.models.gguf.header import read_header

WHOLE_FILES: set[tuple[str, int, int]] = set()
"""(resolved path, size, modification time) of the files found whole in this process: a load
checks its GGUF once, not at each of its stages (three for an int8 target); a file that
changes is checked again."""


def check_gguf_file(path: Path) -> None:
    """A one-line `ModelNotFound` if `path` is not a whole GGUF file."""
    where = f"cannot load GGUF file {path}"
    stat = path.stat()
    actual, state = stat.st_size, (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if state in WHOLE_FILES:
        return
    try:
        needed = read_header(path).needed_bytes
    except DamagedWeights as error:
        raise damaged(where, error) from None
    except (ValueError, KeyError) as error:
        raise ModelNotFound(f"{where}: not a GGUF model file ({error}): point models.toml at "
                            "a .gguf model file") from None
    check_whole(where, needed, actual)
    WHOLE_FILES.add(state)
