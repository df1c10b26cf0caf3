"""One conversation turn, the shape the chat layer, the TUI and the history share:
a role ("user" or "assistant") and its text. A leaf: standard library only, and it
knows nothing about models, screens or storage."""

from __future__ import annotations

from typing import NamedTuple


class Turn(NamedTuple):
    """A message of a conversation (a tuple, so `(role, text)` literals compare equal)."""

    role: str
    text: str
