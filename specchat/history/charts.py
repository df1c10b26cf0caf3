"""The figures a conversation's charts draw: acceptance rate, τ and tokens/s per answer,
and per verify round across the whole conversation.

One owner for both views: the chat's chart screen (tui/charts.py) and the HTML export's
inline SVG (history/chart_svg.py) draw the charts of `CHARTS` (title, the token kind
whose colour it takes, per answer or per round, its values), from a `ConversationSeries`
built here from the same two
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
from typing import Callable, Iterable, Literal, Sequence

from specchat.token_kinds import DRAFT_KINDS, TARGET_KINDS, TokenKind


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
        elif kind in TARGET_KINDS:
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


def percent(rate: float | None) -> float | None:
    return None if rate is None else rate * 100


@dataclass(frozen=True)
class Chart:
    """One chart of a conversation: what it shows and in whose colour. None among its
    values is a figure that does not exist (no drafts: no acceptance rate), drawn as a gap."""

    name: str
    title: str
    tint: TokenKind
    """The token kind whose theme colour it is drawn in."""
    per: Literal["answer", "round"]
    values: Callable[[ConversationSeries], list[float | None]]
    percent: bool = False
    """A rate in percent: drawn on a 0 to 100 axis."""
    short: str = ""
    """The title where a chart is narrow (a third of an 80-column terminal, where the
    row of bars says per answer)."""


CHARTS = (
    Chart("answer-acceptance", "acceptance rate per answer (%)", "accepted", "answer",
          lambda s: [percent(a.acceptance_rate) for a in s.answers], percent=True,
          short="acceptance %"),
    Chart("answer-tau", "τ per answer (tokens per round)", "bonus", "answer",
          lambda s: [a.mean_acceptance_length for a in s.answers], short="τ"),
    Chart("answer-rate", "tokens/s per answer", "target", "answer",
          lambda s: [a.tokens_per_s for a in s.answers], short="tokens/s"),
    Chart("round-acceptance", "acceptance rate per round (%)", "accepted", "round",
          lambda s: [percent(r.acceptance_rate) for r in s.rounds], percent=True),
    Chart("round-tokens", "tokens per round (τ of each round)", "bonus", "round",
          lambda s: [r.tokens for r in s.rounds]),
    Chart("round-rate", "tokens/s per round", "target", "round",
          lambda s: [r.tokens_per_s for r in s.rounds]),
)
"""Every chart, in the order both views show them: per answer (bars), then per round
across the conversation (lines)."""
