"""A draft head put beside its target: checked against it (one-line errors) and labelled.
What each backend gives the head (its embedding and output rows, the kernels of its
linears) is made in models/head_backends.py, outside this room. Knows nothing about
decoding or training.
"""

from __future__ import annotations

from pathlib import Path

from specchat.errors import PairError
from specchat.models.head.files import HeadFile


def check_fits(head: HeadFile, pair_name: str, hidden: int, vocab: int, where: Path) -> None:
    """A `PairError` where the head cannot read this target's features or tokens."""
    shape = head.network.shape
    if shape.hidden != hidden:
        raise PairError(f"pair '{pair_name}': the draft head {where} reads {shape.hidden}-wide "
                        f"features, and the target's are {hidden} wide: it was trained for "
                        f"{head.target or 'another target'}; train one for this target with "
                        "`specchat distill --head`")
    if head.vocab and max(head.vocab) >= vocab:
        raise PairError(f"pair '{pair_name}': the draft head {where} proposes token ids up to "
                        f"{max(head.vocab)}, past the target's vocabulary of {vocab}: it was "
                        f"trained for {head.target or 'another target'}")


def label(head: HeadFile, weights: str) -> str:
    """e.g. "head (1 layer over the target's features, 29.1 M parameters, int8, 16384-token
    vocabulary)"."""
    count = head.parameters / 1e6
    return (f"head (1 layer over the target's features, {count:.1f} M parameters, {weights}, "
            f"{len(head.vocab)}-token vocabulary)")
