"""The fates a token can have (docs/design.md §2), the one tuple every layer shows them by:
accepted (a draft the target kept), rejected (a draft thrown away: a ghost, never part
of the text), resampled (the target's correction after a rejection), bonus (the
target's extra token after a full accept), target (plain decoding).

A leaf: standard library only, so the chat layer, the history's exports and the TUI's
legend, colours and transcript all import it. The engine, which imports no other part
of specchat, names the target's own kinds (resampled, bonus, target) in its `Round`;
tests/test_owners.py checks they are among these.
"""

from __future__ import annotations

from typing import Literal

TokenKind = Literal["accepted", "rejected", "resampled", "bonus", "target"]
TOKEN_KINDS: tuple[TokenKind, ...] = ("accepted", "rejected", "resampled", "bonus", "target")
"""In the order a legend lists them."""
FATES: tuple[TokenKind, ...] = ("accepted", "rejected", "resampled", "bonus")
"""The four fates a speculative answer shows (never one colour for two)."""
DRAFT_KINDS: tuple[TokenKind, ...] = ("accepted", "rejected")
"""A draft token's fates: a round's drafts come first, the accepted before the rejected."""
TARGET_KINDS: tuple[TokenKind, ...] = ("resampled", "bonus", "target")
"""The target's own token: one per verify round, its last."""
