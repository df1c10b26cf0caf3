"""Speculation statistics accumulated from `Round` events, named as vLLM and
llama.cpp users know them (DESIGN.md §4). Pure bookkeeping over token counts and
timings; knows nothing about text or wall clocks beyond what it is handed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from specchat.engine.decoder import Round
from specchat.theory import alpha_from_tau, expected_tokens_per_round, ideal_speedup

__all__ = ["SpecStats", "alpha_from_tau", "expected_tokens_per_round", "ideal_speedup"]


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
    token_times: list[tuple[float, int]] = field(default_factory=list)
    """(seconds per token, tokens) for every round: the per-token latency distribution."""

    def update(self, event: Round) -> None:
        self.rounds += 1
        self.drafted += event.drafted
        self.accepted += len(event.accepted)
        self.tokens += len(event.committed)
        self.draft_s += event.draft_s
        self.verify_s += event.verify_s
        if event.drafted:
            _bump(self.histogram, len(event.accepted))
            for i in range(event.drafted):
                _bump(self.position_drafted, i)
                if i < len(event.accepted):
                    _bump(self.position_accepted, i)
        if event.committed:
            seconds = (event.draft_s + event.verify_s) / len(event.committed)
            self.token_times.append((seconds, len(event.committed)))

    def merge(self, other: "SpecStats") -> None:
        for name in ("rounds", "drafted", "accepted", "tokens", "draft_s", "verify_s"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("histogram", "position_drafted", "position_accepted"):
            mine, theirs = getattr(self, name), getattr(other, name)
            for i, count in enumerate(theirs):
                _bump(mine, i, count)
        self.token_times.extend(other.token_times)

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
