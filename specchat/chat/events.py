"""What the chat layer streams to its consumers (CLI, TUI, bench, history).

Plain dataclasses with no torch inside, so the TUI can import this module without
loading the engine. Token kinds are specchat/token_kinds.py's (docs/design.md §2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from specchat.token_kinds import TokenKind


ONE, MERGED, SPLIT = "one", "merged", "split"
"""How a cross-tokenizer draft's proposed target token lines up with the draft model's own
tokens: exactly one of them, several whole ones, or an end inside one (chat/cross/text.py)."""


@dataclass(frozen=True)
class TokenSpan:
    """One token's text and fate."""

    text: str
    kind: TokenKind
    token_id: int
    margin: float | None = None
    """The target's top-two logit margin where it chose (or kept) this token; None for ghosts."""
    alignment: str = ""
    """A draft of another tokenizer's token: how this target token lines up with the draft's
    tokens (ONE, MERGED, SPLIT); "" for the target's own token and for a draft that shares
    the target's tokenizer."""

    @property
    def unaligned(self) -> bool:
        """Not exactly one of a cross-tokenizer draft's tokens: the chat underlines it."""
        return self.alignment in (MERGED, SPLIT)


@dataclass(frozen=True)
class StatsSnapshot:
    """The answer's metrics so far (docs/design.md §4); None where not yet defined."""

    tokens: int = 0
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    per_position_acceptance: tuple[float, ...] = ()
    histogram: tuple[int, ...] = ()
    tokens_per_s: float | None = None
    """Decode speed: tokens after the first round / decode time since it ended (pauses excluded)."""
    live_tokens_per_s: float | None = None
    """The same over a short sliding window of recent rounds."""
    ttft_s: float | None = None
    """Submit -> first committed token (carries the prompt's prefill)."""
    elapsed_s: float = 0.0
    """Submit -> now, pauses excluded."""
    draft_s: float = 0.0
    verify_s: float = 0.0
    p50_token_ms: float | None = None
    p99_token_ms: float | None = None
    k: int = 0
    """The draft length the last round asked for (0: it drafted nothing)."""
    prompt_tokens: int = 0
    kept_tokens: int = 0
    """Of the prompt's tokens, those the caches already held (not read again: the TTFT's
    prefill read only the rest)."""
    first_round_tokens: int = 0
    decode_tokens: int = 0
    """Tokens after the first round: the ones `tokens_per_s` counts."""
    decode_s: float = 0.0
    """Decode time since the first round ended, pauses excluded."""
    alpha: float | None = None
    """Per-token acceptance from the acceptance events (accepted / tested draft positions)."""
    drafting_rounds: int = 0
    k_in_use: int | None = None
    """The draft length most drafting rounds asked for."""
    target_forwards: tuple[tuple[int, int, int, float], ...] = ()
    """The target's forwards after the first round, per width: (tokens verified, rounds,
    their summed context length, their summed seconds); what `Baseline.load_factor`
    compares with the same forwards timed when the machine was idle."""
    decode_drafting: tuple[int, float] = (0, 0.0)
    """Draft tokens proposed in the rounds after the first, and the seconds proposing took."""
    round_ms: tuple[float, ...] = ()
    """Each round's draft plus verify time in ms, in order: in the answer's last snapshot
    only (`AnswerDone.stats`), where the charts read each round's tokens/s."""

    def as_dict(self) -> dict[str, object]:
        """The documented `done.stats` keys of `specchat run --jsonl`."""
        return {"tokens": self.tokens, "tokens_per_s": self.tokens_per_s, "ttft_s": self.ttft_s,
                "rounds": self.rounds, "drafted": self.drafted, "accepted": self.accepted,
                "acceptance_rate": self.acceptance_rate,
                "mean_acceptance_length": self.mean_acceptance_length,
                "per_position_acceptance": list(self.per_position_acceptance),
                "histogram": list(self.histogram), "alpha": self.alpha,
                "prompt_tokens": self.prompt_tokens, "kept_tokens": self.kept_tokens,
                "decode_s": self.decode_s,
                "p50_token_ms": self.p50_token_ms, "p99_token_ms": self.p99_token_ms,
                **({"round_ms": [round(ms, 3) for ms in self.round_ms]} if self.round_ms else {})}


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


def spans_of(updates: Sequence[RoundUpdate]) -> tuple[TokenSpan, ...]:
    """The spans of consecutive rounds, in order."""
    return tuple(span for update in updates for span in update.spans)


@dataclass(frozen=True)
class ContextTrimmed:
    """Oldest exchanges were left out of the prompt to fit the model's context."""

    dropped_exchanges: int
    context_length: int


@dataclass(frozen=True)
class ReadingPrompt:
    """The prompt the model reads before its first round: a long one keeps it busy for
    seconds (a minute for 3,000 tokens of the 1.5B Qwen target on 2 CPU cores)."""

    tokens: int
    kept: int = 0
    """Of them, those the caches already held from the answer before: not read again."""

    @property
    def to_read(self) -> int:
        return self.tokens - self.kept


@dataclass(frozen=True)
class AnswerDone:
    """The answer is complete (or stopped); `text` excludes rejected drafts."""

    text: str
    stop_reason: str
    """eos, max_tokens (the length asked for), context_full (the model's context had no room
    for more, long before that length), stopped, or failed (out of memory or context
    mid-answer: `error`)."""
    stats: StatsSnapshot
    spans: tuple[TokenSpan, ...] = field(default=(), repr=False)
    error: str = ""
    """Why a failed answer ended; the text so far is kept in the conversation."""


ChatEvent = RoundUpdate | ContextTrimmed | ReadingPrompt | AnswerDone
