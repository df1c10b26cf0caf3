"""Wall-clock metrics around the engine's `SpecStats`: TTFT, decode tokens/s over
the whole answer and over a short sliding window, snapshotted into the chat layer's
`StatsSnapshot`.

One clock for every rate: decode time, which is wall time minus the time the
consumer held the stream (`hold`: step mode, slow motion, printing), so a paused
demo does not read slow. The definitions (README "Metrics"):
- tokens/s: tokens after the first round / decode time since the first round ended;
- live tokens/s: the same over the last `WINDOW_ROUNDS` rounds;
- TTFT: submit -> first committed token (carries the prompt's prefill);
- time per token p50/p99: per round, its seconds over its tokens, rounds after the
  first only (engine/stats.py), weighted by tokens.
The target's forwards after the first round are summed per width (`target_forwards`):
the speedup gauge compares them with the same forwards timed idle (chat/baseline.py).
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

    def __init__(self, clock: Callable[[], float] = time.perf_counter, prompt_tokens: int = 0,
                 kept_tokens: int = 0):
        self.clock = clock
        self.held_s = 0.0
        self.submitted = clock()
        self.prompt_tokens = prompt_tokens
        self.kept_tokens = kept_tokens
        self.first_token_at: float | None = None
        self.first_round_tokens = 0
        self.spec = SpecStats()
        self.recent: deque[tuple[float, int]] = deque(maxlen=WINDOW_ROUNDS)
        self.k = 0
        self.forwards: dict[int, tuple[int, int, float]] = {}
        """width -> (rounds, summed context length, summed verify seconds), decode rounds only."""
        self.drafting = (0, 0.0)
        """(draft tokens, seconds proposing them), decode rounds only."""
        self.round_ms: list[float] = []
        """Each round's draft plus verify time, in ms."""

    def now(self) -> float:
        """Decode time: the clock less every moment the consumer held the stream."""
        return self.clock() - self.held_s

    def hold(self, seconds: float) -> None:
        """The consumer kept the stream this long between two rounds: not decoding time."""
        self.held_s += max(0.0, seconds)

    def record(self, event: Round) -> None:
        now = self.now()
        if self.first_token_at is not None:
            self._count_decode_round(event)
        if self.first_token_at is None and event.committed:
            self.first_token_at = now
            self.first_round_tokens = len(event.committed)
        self.spec.update(event)
        self.recent.append((now, len(event.committed)))
        self.round_ms.append((event.draft_s + event.verify_s) * 1000)
        self.k = event.k

    def _count_decode_round(self, event: Round) -> None:
        """Sum a decode round's verify forward by width, and its drafting (a round that
        carried a prefill, `fed` beyond its drafts and one, is left out)."""
        width = event.drafted + 1
        if event.fed and event.fed != width:
            return
        rounds, contexts, seconds = self.forwards.get(width, (0, 0, 0.0))
        context = self.prompt_tokens + self.spec.tokens
        self.forwards[width] = (rounds + 1, contexts + context, seconds + event.verify_s)
        drafted, draft_s = self.drafting
        self.drafting = (drafted + event.drafted, draft_s + event.draft_s)

    def _window_rate(self) -> float | None:
        if len(self.recent) < 2:
            return None
        span = self.recent[-1][0] - self.recent[0][0]
        tokens = sum(n for _, n in list(self.recent)[1:])
        return tokens / span if span > 0 else None

    def _decode(self, now: float) -> tuple[int, float]:
        """(tokens after the first round, decode seconds since the first round ended)."""
        if self.first_token_at is None:
            return 0, 0.0
        return self.spec.tokens - self.first_round_tokens, max(0.0, now - self.first_token_at)

    def snapshot(self, final: bool = False) -> StatsSnapshot:
        """The answer so far; `final` (the answer's last) also carries each round's time."""
        now = self.now()
        spec = self.spec
        decode_tokens, decode_s = self._decode(now)
        p50, p99 = spec.token_time_percentile(0.5), spec.token_time_percentile(0.99)
        return StatsSnapshot(
            tokens=spec.tokens, rounds=spec.rounds, drafted=spec.drafted, accepted=spec.accepted,
            acceptance_rate=spec.acceptance_rate, mean_acceptance_length=spec.mean_acceptance_length,
            per_position_acceptance=tuple(spec.per_position_acceptance),
            histogram=tuple(spec.histogram),
            tokens_per_s=decode_tokens / decode_s if decode_tokens >= 1 and decode_s > 0 else None,
            live_tokens_per_s=self._window_rate(),
            ttft_s=None if self.first_token_at is None else self.first_token_at - self.submitted,
            elapsed_s=now - self.submitted, draft_s=spec.draft_s, verify_s=spec.verify_s,
            p50_token_ms=None if p50 is None else p50 * 1000,
            p99_token_ms=None if p99 is None else p99 * 1000, k=self.k,
            prompt_tokens=self.prompt_tokens, kept_tokens=self.kept_tokens,
            first_round_tokens=self.first_round_tokens,
            decode_tokens=decode_tokens, decode_s=decode_s, alpha=spec.alpha,
            drafting_rounds=spec.drafting_rounds, k_in_use=spec.k_in_use,
            target_forwards=tuple((width, *sums) for width, sums in sorted(self.forwards.items())),
            decode_drafting=self.drafting, round_ms=tuple(self.round_ms) if final else ())
