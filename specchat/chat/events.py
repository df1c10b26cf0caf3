"""What the chat layer streams to its consumers (CLI, TUI, bench, history).

Plain dataclasses with no torch inside, so the TUI can import this module without
loading the engine. Token kinds follow DESIGN.md §4: accepted, rejected (a
ghost, never part of the text), resampled, bonus, target (plain decoding).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

TokenKind = Literal["accepted", "rejected", "resampled", "bonus", "target"]
TOKEN_KINDS: tuple[TokenKind, ...] = ("accepted", "rejected", "resampled", "bonus", "target")


@dataclass(frozen=True)
class TokenSpan:
    """One token's text and fate."""

    text: str
    kind: TokenKind
    token_id: int


@dataclass(frozen=True)
class StatsSnapshot:
    """The answer's metrics so far (DESIGN.md §4); None where not yet defined."""

    tokens: int = 0
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    per_position_acceptance: tuple[float, ...] = ()
    histogram: tuple[int, ...] = ()
    tokens_per_s: float | None = None
    """Committed tokens / decode wall time since the first round started."""
    live_tokens_per_s: float | None = None
    """The same over a short sliding window of recent rounds."""
    ttft_s: float | None = None
    elapsed_s: float = 0.0
    draft_s: float = 0.0
    verify_s: float = 0.0
    p50_token_ms: float | None = None
    p99_token_ms: float | None = None
    k: int = 0

    def as_dict(self) -> dict:
        """The documented `done.stats` keys of `specchat run --jsonl`."""
        return {"tokens": self.tokens, "tokens_per_s": self.tokens_per_s, "ttft_s": self.ttft_s,
                "rounds": self.rounds, "drafted": self.drafted, "accepted": self.accepted,
                "acceptance_rate": self.acceptance_rate,
                "mean_acceptance_length": self.mean_acceptance_length,
                "per_position_acceptance": list(self.per_position_acceptance),
                "histogram": list(self.histogram)}


@dataclass(frozen=True)
class RoundUpdate:
    """One verify round, as text spans in display order, with the stats after it."""

    accepted: tuple[TokenSpan, ...]
    rejected: tuple[TokenSpan, ...]
    token: TokenSpan | None
    draft_ms: float
    verify_ms: float
    stats: StatsSnapshot

    @property
    def spans(self) -> tuple[TokenSpan, ...]:
        """Accepted drafts, the rejected ghosts where they were proposed, then the target's token."""
        return self.accepted + self.rejected + ((self.token,) if self.token else ())

    @property
    def committed_text(self) -> str:
        return "".join(s.text for s in self.spans if s.kind != "rejected")


@dataclass(frozen=True)
class ContextTrimmed:
    """Oldest exchanges were left out of the prompt to fit the model's context."""

    dropped_exchanges: int
    context_length: int


@dataclass(frozen=True)
class AnswerDone:
    """The answer is complete (or stopped); `text` excludes rejected drafts."""

    text: str
    stop_reason: str
    """eos, max_tokens, stopped, or failed (out of memory or context mid-answer: `error`)."""
    stats: StatsSnapshot
    spans: tuple[TokenSpan, ...] = field(default=(), repr=False)
    error: str = ""
    """Why a failed answer ended; the text so far is kept in the conversation."""


ChatEvent = RoundUpdate | ContextTrimmed | AnswerDone
