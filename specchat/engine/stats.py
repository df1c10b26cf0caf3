"""Speculation statistics accumulated from `Round` events, named as vLLM and
llama.cpp users know them (docs/design.md §4). Pure bookkeeping over token counts and
timings; knows nothing about text or wall clocks beyond what it is handed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from specchat.engine.events import Round
from specchat.engine.theory import acceptance_alpha


def carried_prefill(event: Round) -> bool:
    """Whether the round's target forward also carried tokens its cache lacked (the prompt,
    in an answer's first round): its timings are not those of a decoding round."""
    return event.fed > event.drafted + 1


@dataclass
class SpecStats:
    """Running totals for one answer (or a whole benchmark, via `merge`)."""

    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    tokens: int = 0
    draft_s: float = 0.0
    verify_s: float = 0.0
    histogram: list[int] = field(default_factory=list)
    """histogram[n] = drafting rounds that kept exactly n drafts."""
    position_drafted: list[int] = field(default_factory=list)
    position_accepted: list[int] = field(default_factory=list)
    position_tried: list[int] = field(default_factory=list)
    """position_tried[i] = rounds that drafted draft i and accepted every draft before it."""
    k_used: dict[int, int] = field(default_factory=dict)
    """Drafting rounds by the draft length they asked for (after clipping to the budget)."""
    decode_rounds: int = 0
    """Rounds that did not carry the prompt: the ones timed below."""
    decode_drafted: int = 0
    decode_draft_s: float = 0.0
    verify_by_width: dict[int, tuple[int, float]] = field(default_factory=dict)
    """Tokens verified -> (rounds, seconds) over rounds that did not carry the prompt."""
    token_times: list[tuple[float, int]] = field(default_factory=list)
    """(seconds per token, tokens) for every round but one carrying the prompt: the
    per-token latency distribution of decoding (prefill is TTFT's)."""

    def update(self, event: Round) -> None:
        self.rounds += 1
        self.drafted += event.drafted
        self.accepted += len(event.accepted)
        self.tokens += len(event.committed)
        self.draft_s += event.draft_s
        self.verify_s += event.verify_s
        if event.drafted:
            self._count_positions(event)
        if not carried_prefill(event):
            self._time_decode_round(event)

    def _count_positions(self, event: Round) -> None:
        accepted = len(event.accepted)
        _bump(self.histogram, accepted)
        self.k_used[event.k] = self.k_used.get(event.k, 0) + 1
        for i in range(event.drafted):
            _bump(self.position_drafted, i)
            if i <= accepted:  # draft i was tested: every draft before it was kept
                _bump(self.position_tried, i)
            if i < accepted:
                _bump(self.position_accepted, i)

    def _time_decode_round(self, event: Round) -> None:
        self.decode_rounds += 1
        self.decode_drafted += event.drafted
        self.decode_draft_s += event.draft_s
        width = event.drafted + 1
        rounds, seconds = self.verify_by_width.get(width, (0, 0.0))
        self.verify_by_width[width] = (rounds + 1, seconds + event.verify_s)
        if event.committed:
            seconds = (event.draft_s + event.verify_s) / len(event.committed)
            self.token_times.append((seconds, len(event.committed)))

    def merge(self, other: "SpecStats") -> None:
        for name in ("rounds", "drafted", "accepted", "tokens", "draft_s", "verify_s",
                     "decode_rounds", "decode_drafted", "decode_draft_s"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("histogram", "position_drafted", "position_accepted", "position_tried"):
            mine, theirs = getattr(self, name), getattr(other, name)
            for i, count in enumerate(theirs):
                _bump(mine, i, count)
        for k, count in other.k_used.items():
            self.k_used[k] = self.k_used.get(k, 0) + count
        for width, (rounds, seconds) in other.verify_by_width.items():
            mine_rounds, mine_seconds = self.verify_by_width.get(width, (0, 0.0))
            self.verify_by_width[width] = (mine_rounds + rounds, mine_seconds + seconds)
        self.token_times.extend(other.token_times)

    @property
    def alpha(self) -> float | None:
        """Per-token acceptance from the acceptance events (theory.acceptance_alpha)."""
        return acceptance_alpha(self.position_accepted, self.position_tried)

    @property
    def drafting_rounds(self) -> int:
        return sum(self.histogram)

    @property
    def k_in_use(self) -> int | None:
        """The draft length most drafting rounds asked for (None before any drafted)."""
        return max(self.k_used, key=lambda k: (self.k_used[k], k)) if self.k_used else None

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted drafts / drafted tokens; None before anything was drafted."""
        return self.accepted / self.drafted if self.drafted else None

    @property
    def mean_acceptance_length(self) -> float | None:
        """τ: committed tokens per verify round, counting the resampled or bonus token."""
        return self.tokens / self.rounds if self.rounds else None

    @property
    def per_position_acceptance(self) -> list[float]:
        """The one definition: at each draft position i, the rounds that kept draft i over
        the rounds that drafted it (a position after a rejection counts as not kept)."""
        return [a / d for a, d in zip(_padded(self.position_accepted, len(self.position_drafted)),
                                      self.position_drafted)]

    def token_time_percentile(self, q: float) -> float | None:
        """Seconds per token at quantile q (0..1), each round weighted by its tokens."""
        if not self.token_times:
            return None
        ordered = sorted(self.token_times)
        total = sum(n for _, n in ordered)
        rank = max(1, math.ceil(q * total))
        seen = 0
        for seconds, n in ordered:
            seen += n
            if seen >= rank:
                return seconds
        return ordered[-1][0]


def _bump(counts: list[int], index: int, by: int = 1) -> None:
    while len(counts) <= index:
        counts.append(0)
    counts[index] += by


def _padded(values: list[int], length: int) -> list[int]:
    return values + [0] * (length - len(values))
