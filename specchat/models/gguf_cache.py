"""Converting a GGUF file to a transformers folder once, and reusing it.

De-quantizing a GGUF with transformers takes many seconds, so the first load
saves the converted float32 weights and the tokenizer under the user cache
directory, keyed by the file's path, size and modification time. Later loads
read that folder in well under a second. Writes go to a temporary folder that is
renamed into place, so an interrupted conversion never leaves a broken cache.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

from specchat import paths
from specchat.models.cache_build import build_once, is_built



def cache_key(gguf: Path) -> str:
    stat = gguf.stat()
    digest = hashlib.sha256(f"{gguf.resolve()}|{stat.st_size}|{int(stat.st_mtime)}".encode())
    return f"{gguf.stem}-{digest.hexdigest()[:12]}"


def converted_folder(gguf: Path) -> Path:
    return paths.cache_dir() / "converted" / cache_key(gguf)


def is_converted(gguf: Path) -> bool:
    return is_built(converted_folder(gguf))


def ensure_converted(gguf: Path, progress: Callable[[str], None] = lambda _: None) -> Path:
    """The converted folder for `gguf`, converting it first if needed."""
    target = converted_folder(gguf)
    if not is_built(target):
        progress(f"converting {gguf.name} (first use only)")
    return build_once(target, lambda staging: _convert(gguf, staging), f"converted from {gguf}")


def _convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                     dtype=torch.float32)
    finally:
        logging.set_verbosity(verbosity)
        logging.enable_progress_bar()
    # the weights are plain float32 now: drop the GGUF marker so they can be saved
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
