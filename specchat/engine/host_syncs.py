"""Counting the host's waits on a CUDA device: the engine promises one per round (reading
the round's verdict, engine/decoder.py `read_round`), and `pytest -m gpu` and
`python -m devtools scale` check it with this one counter.

CUDA's sync debug mode ("warn") turns every synchronizing call into a Python warning
whose place is the Python line that made it. The mode also warns once that it is a
prototype ("Synchronization debug mode is a prototype feature..."): that notice is no
sync, and counting it (any message with "synchroniz" in it) made the first GPU run report
1.12 syncs a round over 8 rounds, the notice's one in nine.

Knows nothing about models or rounds.
"""

from __future__ import annotations

import warnings
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

SYNC_WARNING = "called a synchronizing"
"""What the sync debug mode's warning for an actual host sync says."""


def is_host_sync(message: str) -> bool:
    """Whether a warning from the sync debug mode reports a host sync (not its notice)."""
    return SYNC_WARNING in message


@contextmanager
def host_syncs() -> Iterator[list[str]]:
    """Within the block, each host sync on CUDA is noted; the yielded list holds, after the
    block, each one's place ("file.py:line")."""
    import torch

    places: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield places
        finally:
            torch.cuda.set_sync_debug_mode("default")
    places.extend(f"{Path(w.filename).name}:{w.lineno}" for w in caught
                  if is_host_sync(str(w.message)))


def by_place(places: list[str]) -> dict[str, int]:
    """How many syncs each place made, the most first."""
    return dict(Counter(places).most_common())
