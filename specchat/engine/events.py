"""What the decoding loop yields: one `Round` per verify pass, then a `Finished`.

Plain dataclasses of token ids and seconds, standard library only (no torch), so that the
statistics (engine/stats.py), the chat layer's metrics and a scripted pair that plays
rounds without a model (chat/scripted.py) all read the same events without importing
torch. The decoder (engine/decoder.py) makes them. Knows nothing about text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TokenKind = Literal["resampled", "bonus", "target"]
"""The kinds the target's own token can have: three of specchat/token_kinds.py's, named
here because the engine imports nothing of specchat's outside itself (tests/test_owners.py
checks they stay among those)."""
StopReason = Literal["eos", "max_tokens", "stopped"]


@dataclass(frozen=True)
class Round:
    """What one verify pass decided."""

    accepted: tuple[int, ...]
    """Drafts the target kept, in order (a prefix of the proposal)."""
    rejected: tuple[int, ...]
    """Drafts thrown away: the first rejected one and everything after it."""
    token: int | None
    """The target's own token after the accepted drafts; None if an accepted EOS ended the answer."""
    token_kind: TokenKind
    draft_s: float
    verify_s: float
    k: int
    """The draft length asked for this round (0 for plain decoding)."""
    fed: int = 0
    """Tokens the target's forward processed this round: drafted + 1, more when it also
    carried tokens its cache lacked (the prompt, in an answer's first round)."""
    margins: tuple[float, ...] = ()
    """The target's top-two logit margin (raw logits) at the position of each committed
    token, in order: how near a tie each choice was (for the race's verdict)."""
    by_lookup: bool = False
    """The drafts were copied by prompt lookup inside a lookup-first drafter (free), not
    drafted by its model or head: k = "auto" learns their acceptance apart."""

    @property
    def drafted(self) -> int:
        return len(self.accepted) + len(self.rejected)

    @property
    def committed(self) -> tuple[int, ...]:
        return self.accepted + (() if self.token is None else (self.token,))


@dataclass(frozen=True)
class Finished:
    """The answer is complete."""

    stop_reason: StopReason
    new_tokens: int


Event = Round | Finished
