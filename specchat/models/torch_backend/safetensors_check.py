"""Whether a model folder's safetensors files are whole, read from their headers alone,
before transformers loads them.

A safetensors file is an 8-byte header length, a JSON header (each tensor's dtype, shape and
`data_offsets` into the data), then the data. A file cut short (an interrupted download or
copy) fails inside transformers as a SafetensorError traceback ("incomplete metadata, file
not fully covered"). `check_safetensors_folder` computes the size each file's tensors need
and says "truncated or corrupt" in one line, naming the file with both sizes, as
models/gguf/integrity.py does for GGUF files. The header is read by device/estimate.py's
`safetensors_header` (its one reader); loads no tensor.
"""

from __future__ import annotations

from pathlib import Path

from specchat.errors import ModelNotFound
from specchat.models.device.estimate import DamagedWeights, safetensors_header


def needed_bytes(path: Path) -> int:
    """The file size the header's tensors need: the header plus the furthest tensor's end."""
    header, start = safetensors_header(path)
    ends = [int(info["data_offsets"][1]) for name, info in header.items() if name != "__metadata__"]
    return start + max(ends, default=0)


def check_safetensors_file(path: Path) -> None:
    """A one-line `ModelNotFound` if `path` is not a whole safetensors file."""
    actual = path.stat().st_size
    try:
        needed = needed_bytes(path)
    except DamagedWeights as error:
        raise ModelNotFound(f"cannot load {path}: {error}: download or copy it again") from None
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
        raise ModelNotFound(f"cannot load {path}: not a safetensors file (its header does not "
                            f"read: {error}): download or copy it again") from None
    if actual < needed:
        raise ModelNotFound(f"cannot load {path}: truncated or corrupt: its tensors need "
                            f"{needed:,} bytes, the file has {actual:,}: download or copy it again")


def check_safetensors_folder(folder: Path | str) -> None:
    """Check every safetensors file of a model folder (a hub id that is no folder: nothing)."""
    folder = Path(folder)
    if folder.is_dir():
        for path in sorted(folder.glob("*.safetensors")):
            check_safetensors_file(path)
