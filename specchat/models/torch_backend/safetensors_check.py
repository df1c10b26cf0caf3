"""Whether a model folder's safetensors files are whole, read from their headers alone,
before transformers loads them.

A safetensors file is an 8-byte header length, a JSON header (each tensor's dtype, shape and
`data_offsets` into the data), then the data. A file cut short (an interrupted download or
copy) fails inside transformers as a SafetensorError traceback ("incomplete metadata, file
not fully covered"). `check_safetensors_folder` computes the size each file's tensors need
and says "truncated or corrupt" in one line, naming the file with both sizes, in the words
models/gguf/integrity.py uses for GGUF files (both from specchat/errors.py's `damaged` and
`check_whole`). The header is read by device/estimate.py's `safetensors_header` (its one
reader); loads no tensor.
"""

from __future__ import annotations

from pathlib import Path

from specchat.errors import DamagedWeights, ModelNotFound, check_whole, damaged
from specchat.models.device.estimate import safetensors_header


def needed_bytes(path: Path) -> int:
    """The file size the header's tensors need: the header plus the furthest tensor's end."""
    header, start = safetensors_header(path)
    ends = [int(info["data_offsets"][1]) for name, info in header.items() if name != "__metadata__"]
    return start + max(ends, default=0)


def check_safetensors_file(path: Path) -> None:
    """A one-line `ModelNotFound` if `path` is not a whole safetensors file."""
    where, actual = f"cannot load {path}", path.stat().st_size
    try:
        needed = needed_bytes(path)
    except DamagedWeights as error:
        raise damaged(where, error) from None
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
        raise ModelNotFound(f"{where}: not a safetensors file (its header does not read: "
                            f"{error}): download or copy it again") from None
    check_whole(where, needed, actual)


def check_safetensors_folder(folder: Path | str) -> None:
    """Check every safetensors file of a model folder (a hub id that is no folder: nothing)."""
    folder = Path(folder)
    if folder.is_dir():
        for path in sorted(folder.glob("*.safetensors")):
            check_safetensors_file(path)
