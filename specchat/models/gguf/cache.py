"""Converting a GGUF file to a transformers folder once, and reusing it; its tokenizer alone.

De-quantizing a GGUF with transformers takes many seconds, so the first load
saves the converted float32 weights and the tokenizer under the user cache
directory, keyed by the file's path, size and modification time (a folder whose file is
gone or changed is dropped when the next is built: cache_build.py). Later loads
read that folder in well under a second. Writes go to a temporary folder that is
renamed into place, so an interrupted conversion never leaves a broken cache. A GGUF
model on llama.cpp needs only the tokenizer: it is cached the same way, alone, and small
facts about a file (its vocabulary's digest) are remembered beside it. A file that cannot be
read becomes a one-line `ModelNotFound`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

from specchat import paths
from specchat.errors import ModelNotFound, SpecchatError, one_line
from specchat.models.gguf.integrity import check_gguf_file
from specchat.models.config.cache_build import build_once, is_built


def cache_key(gguf: Path) -> str:
    stat = gguf.stat()
    digest = hashlib.sha256(f"{gguf.resolve()}|{stat.st_size}|{int(stat.st_mtime)}".encode())
    return f"{gguf.stem}-{digest.hexdigest()[:12]}"


def converted_folder(gguf: Path) -> Path:
    return paths.cache_dir() / "converted" / cache_key(gguf)


def ensure_converted(gguf: Path, progress: Callable[[str], None] = lambda _: None) -> Path:
    """The converted folder for `gguf`, converting it first if needed."""
    target = converted_folder(gguf)
    if not is_built(target):
        progress(f"converting {gguf.name} (first use only)")
    return readable(gguf, lambda: build_once(target, lambda staging: _convert(gguf, staging),
                                             f"converted from {gguf}", [gguf]))


def load_tokenizer(gguf: Path, progress: Callable[[str], None] = lambda _: None):
    """transformers' tokenizer for `gguf`, read from the file once and then from the cache
    (the converted folder when there is one: its tokenizer is the same)."""
    from transformers import AutoTokenizer

    folder = tokenizer_folder(gguf, progress)
    with_added_tokens(folder)  # a folder cached before it was written at build time
    return AutoTokenizer.from_pretrained(folder)


def tokenizer_folder(gguf: Path, progress: Callable[[str], None] = lambda _: None) -> Path:
    """The cached folder `load_tokenizer` reads `gguf`'s tokenizer from, built if need be."""
    folder = converted_folder(gguf)
    if not is_built(folder):
        folder = paths.cache_dir() / "tokenizers" / cache_key(gguf)
        if not is_built(folder):
            progress(f"reading the tokenizer of {gguf.name} (first use only)")
        readable(gguf, lambda: build_once(folder, lambda staging: _tokenizer(gguf, staging),
                                          f"tokenizer of {gguf}", [gguf]))
    return folder


ADDED_TOKENS = "added_tokens_decoder"


def with_added_tokens(folder: Path) -> None:
    """Copy `tokenizer.json`'s added tokens into the cached folder's `tokenizer_config.json`
    (`added_tokens_decoder`, as transformers 4 wrote it) where that lacks them. transformers
    5 saves them in `tokenizer.json` alone, and reading such a folder parses the whole of
    `tokenizer.json` in Python once more to find them: 0.31 s of every load of Qwen2.5's
    10.6 MB file. The config is replaced by a rename; a folder that cannot be read or
    written is left as it is (the tokenizer reads the same either way)."""
    config_file = folder / "tokenizer_config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
        if ADDED_TOKENS in config:
            return
        added = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]
        config[ADDED_TOKENS] = {str(token["id"]): {key: value for key, value in token.items()
                                                   if key != "id"} for token in added}
        paths.write_whole(config_file, json.dumps(config, indent=2, ensure_ascii=False))
    except (OSError, ValueError, KeyError, TypeError):
        return


def remembered(gguf: Path, name: str, compute: Callable[[], str]) -> str:
    """A fact about `gguf` (one line of text, e.g. its vocabulary's digest), computed once and
    then read from the cache, keyed like the conversions by the file's path, size and mtime."""
    folder = paths.cache_dir() / "facts" / f"{cache_key(gguf)}-{name}"
    build_once(folder, lambda staging: (staging / name).write_text(compute()), f"{name} of {gguf}",
               [gguf])
    return (folder / name).read_text()


def readable(gguf: Path, build: Callable[[], Path]) -> Path:
    """`build()` once `gguf` is a whole GGUF file, with any failure to read it as a one-line
    `ModelNotFound`."""
    if gguf.is_file():
        check_gguf_file(gguf)
    try:
        return build()
    except SpecchatError:
        raise
    except Exception as error:  # noqa: BLE001 - gguf and transformers raise many kinds
        detail = one_line(error, 200)
        raise ModelNotFound(f"cannot read GGUF file {gguf} ({detail}): use a GGUF model file "
                            "whose architecture and tokenizer transformers supports") from None


def _tokenizer(gguf: Path, out: Path) -> None:
    from transformers import AutoTokenizer
    from transformers.utils import logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(out)
    finally:
        logging.set_verbosity(verbosity)
    with_added_tokens(out)


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
    model.hf_quantizer = None  # type: ignore[assignment]  # nn.Module's __setattr__ typing
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    with_added_tokens(out)
