"""Wall-clock metrics around the engine's `SpecStats`: TTFT, tokens/s overall and
over a short sliding window, snapshotted into the chat layer's `StatsSnapshot`.
The clock is injected so tests can drive it.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

from specchat.chat.events import StatsSnapshot
from specchat.engine import Round, SpecStats

WINDOW_ROUNDS = 16


class AnswerMetrics:
    """Accumulates one answer's rounds; `snapshot()` is what the UI shows."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self.submitted = clock()
        self.first_token_at: float | None = None
        self.first_round_tokens = 0
        self.spec = SpecStats()
        self.recent: deque[tuple[float, int]] = deque(maxlen=WINDOW_ROUNDS)
        self.k = 0

    def record(self, event: Round) -> None:
        now = self.clock()
        if self.first_token_at is None and event.committed:
            self.first_token_at = now
            self.first_round_tokens = len(event.committed)
        self.spec.update(event)
        self.recent.append((now, len(event.committed)))
        self.k = event.k

    def _window_rate(self) -> float | None:
        if len(self.recent) < 2:
            return None
        span = self.recent[-1][0] - self.recent[0][0]
        tokens = sum(n for _, n in list(self.recent)[1:])
        return tokens / span if span > 0 else None

    def _overall_rate(self, now: float) -> float | None:
        """Tokens after the first / time since the first: decode speed without prefill."""
        later_tokens = self.spec.tokens - self.first_round_tokens
        if self.first_token_at is None or later_tokens < 1 or now <= self.first_token_at:
            return None
        return later_tokens / (now - self.first_token_at)

    def snapshot(self) -> StatsSnapshot:
        now = self.clock()
        spec = self.spec
        p50, p99 = spec.token_time_percentile(0.5), spec.token_time_percentile(0.99)
        return StatsSnapshot(
            tokens=spec.tokens, rounds=spec.rounds, drafted=spec.drafted, accepted=spec.accepted,
            acceptance_rate=spec.acceptance_rate, mean_acceptance_length=spec.mean_acceptance_length,
            per_position_acceptance=tuple(spec.per_position_acceptance),
            histogram=tuple(spec.histogram), tokens_per_s=self._overall_rate(now),
            live_tokens_per_s=self._window_rate(),
            ttft_s=None if self.first_token_at is None else self.first_token_at - self.submitted,
            elapsed_s=now - self.submitted, draft_s=spec.draft_s, verify_s=spec.verify_s,
            p50_token_ms=None if p50 is None else p50 * 1000,
            p99_token_ms=None if p99 is None else p99 * 1000, k=self.k)
