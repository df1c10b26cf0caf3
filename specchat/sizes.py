"""Byte counts as people read them: the one format every output uses for a size (the chat's
pair panel, `run`'s memory rows, `pairs --check`, placement's messages).

A leaf: standard library only.
"""

from __future__ import annotations

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def size_text(size: float) -> str:
    """B under a KiB, KiB under a MiB, MiB under a GiB (one decimal), GiB with two: a 29 MB
    draft head reads 27.7 MiB, never 0.0 GiB."""
    if size < KIB:
        return f"{size:.0f} B"
    if size < MIB:
        return f"{size / KIB:.1f} KiB"
    if size < GIB:
        return f"{size / MIB:.1f} MiB"
    return f"{size / GIB:.2f} GiB"
