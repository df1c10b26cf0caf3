"""Errors a user can act on: each carries a one-line message naming what is wrong
and what to do. The CLI prints the message and exits with status 2.

Also the one wording of a damaged weights file, shared by the GGUF and the safetensors
checks (models/gguf/integrity.py, models/torch_backend/safetensors_check.py), which live in
rooms that may not import each other: `DamagedWeights` from their header readers, made a
one-line `ModelNotFound` by `damaged`, and `check_whole` for a file smaller than its tensors.

And the one way an exception's message from a library becomes part of a one-line error:
`one_line` (all its lines joined, never only the first, which can stop mid-sentence), cut
by `shortened` after the last whole sentence that fits, marked with "…".

And the one wording of a full disk while specchat writes its cache (`disk_full`).

This module is a leaf: it imports nothing from specchat, so every layer may use it.
"""


class SpecchatError(Exception):
    """A mistake of the user's or of their machine, with an actionable message."""


class ConfigError(SpecchatError):
    """A models.toml or theme file that cannot be used as written."""


class ModelNotFound(SpecchatError):
    """A model reference that resolves to nothing on this machine."""


class PairError(SpecchatError):
    """A draft/target pair that cannot work together (vocabulary, device, quantization)."""


class UsageError(SpecchatError):
    """A command-line value out of range (k < 0, temperature < 0, empty prompt...)."""


class ContextFull(SpecchatError):
    """A conversation longer than the model's KV cache holds."""


class OutOfMemory(SpecchatError):
    """A model, or a round of decoding, that does not fit in the memory there is."""


class DiskFull(SpecchatError):
    """A file specchat writes (a converted model, a joined built-in) that the disk has no
    room for."""


def disk_full(error: OSError, folder: object, what: str) -> DiskFull | None:
    """The one-line error of `error` where it is a full disk or quota, writing `what` under
    `folder`; None for any other error."""
    import errno

    if error.errno not in (errno.ENOSPC, errno.EDQUOT):
        return None
    return DiskFull(f"cannot write {what} under {folder}: the disk is full: free some space "
                    "there; the model cache (`specchat locate cache`) may always be deleted")


class DamagedWeights(ValueError):
    """A weights file whose header declares more than the file holds (cut short, or a garbage
    length or count); its message says what, and `damaged` makes it a user's error. A
    ValueError, so a reader that only estimates sizes skips such a file like any bad one."""


def damaged(where: str, detail: object) -> ModelNotFound:
    """The one-line error of a weights file cut short or spoiled: `where` ("cannot load
    X"), what is wrong (`detail`), and what to do."""
    return ModelNotFound(f"{where}: truncated or corrupt: {detail}: download or copy it again")


def check_whole(where: str, needed: int, actual: int) -> None:
    """A `damaged` error where a file of `actual` bytes is smaller than its tensors need."""
    if actual < needed:
        raise damaged(where, f"its tensors need {needed:,} bytes, the file has {actual:,}")


def shortened(text: str, limit: int) -> str:
    """`text` if it fits in `limit` characters; else up to its last whole sentence (or word)
    that fits, and "…": never a cut in mid-word that reads as the whole message."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    end = head.rfind(". ")
    if end >= limit // 3:
        return head[:end + 1] + " …"
    return head.rsplit(" ", 1)[0].rstrip(" ,;:(") + " …"


def one_line(error: BaseException, limit: int | None = None) -> str:
    """An exception's whole message on one line (transformers' messages run over several, the
    first of which can end at "from one of:"), `shortened` to `limit` if given; its type's
    name if it has no message."""
    text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    text = text or type(error).__name__
    return shortened(text, limit) if limit else text
