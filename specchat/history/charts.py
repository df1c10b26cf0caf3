"""The figures a conversation's charts draw: acceptance rate, τ and tokens/s per answer,
and per verify round across the whole conversation.

One owner for both views: the chat's chart screen (tui/charts.py) and the HTML export's
inline SVG (history/chart_svg.py) build a `ConversationSeries` here from the same two
things per answer: its token kinds in display order and its saved stats (the keys of
`StatsSnapshot.as_dict`). Nothing is recomputed that the stats already hold: the per-answer
figures are the answer's own, as its status line shows them.

Rounds are read back from the token kinds: a round is the draft tokens it proposed
(accepted, then rejected) and the one token the target chose (resampled, bonus, or target
when nothing was drafted). A round's tokens/s comes from the answer's `round_ms` (each
round's draft plus verify time), where the answer saved one per round. Standard library
only; knows nothing about Textual, pygal or the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

DRAFT_KINDS = ("accepted", "rejected")
ROUND_ENDS = ("resampled", "bonus", "target")
"""The target's own token: the last of every round."""


@dataclass(frozen=True)
class AnswerFigures:
    """One answer's figures, as its stats saved them (None where undefined)."""

    number: int
    """1 for the conversation's first answer."""
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    tokens_per_s: float | None


@dataclass(frozen=True)
class RoundFigures:
    """One verify round: what it drafted, what was accepted, what it committed."""

    answer: int
    drafted: int
    accepted: int
    tokens: int
    """Committed tokens: the accepted drafts and the target's own token."""
    tokens_per_s: float | None = None

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None


@dataclass(frozen=True)
class ConversationSeries:
    answers: tuple[AnswerFigures, ...]
    rounds: tuple[RoundFigures, ...]

    @property
    def empty(self) -> bool:
        return not self.answers


def rounds_of(kinds: Sequence[str]) -> list[tuple[int, int]]:
    """(drafted, accepted) of each complete round in an answer's token kinds; tokens after
    the last round's end (an answer stopped mid-round, pending drafts) are no round."""
    rounds, drafted, accepted = [], 0, 0
    for kind in kinds:
        if kind in DRAFT_KINDS:
            drafted += 1
            accepted += kind == "accepted"
        elif kind in ROUND_ENDS:
            rounds.append((drafted, accepted))
            drafted = accepted = 0
    return rounds


def round_figures(number: int, kinds: Sequence[str], round_ms: Sequence[float]) -> list[RoundFigures]:
    """An answer's rounds; tokens/s per round where `round_ms` holds one time per round."""
    counted = rounds_of(kinds)
    timed = len(round_ms) == len(counted)
    return [RoundFigures(number, drafted, accepted, accepted + 1,
                         (accepted + 1) / (round_ms[i] / 1000) if timed and round_ms[i] > 0 else None)
            for i, (drafted, accepted) in enumerate(counted)]


def conversation_series(answers: Iterable[tuple[Sequence[str], dict | None]]) -> ConversationSeries:
    """The series of a conversation's answers, each given as (token kinds, saved stats)."""
    figures, rounds = [], []
    for number, (kinds, stats) in enumerate(answers, start=1):
        stats = stats or {}
        figures.append(AnswerFigures(number, stats.get("acceptance_rate"),
                                     stats.get("mean_acceptance_length"),
                                     stats.get("tokens_per_s")))
        rounds += round_figures(number, kinds, stats.get("round_ms") or ())
    return ConversationSeries(tuple(figures), tuple(rounds))


def saved_series(conversation) -> ConversationSeries:
    """The series of a conversation read back from the history (`SavedConversation`)."""
    return conversation_series(([token.kind for token in turn.tokens], turn.stats)
                               for turn in conversation.turns if turn.role == "assistant")
