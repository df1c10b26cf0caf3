"""A scripted pair: a conversation service that plays a script of rounds at a chosen pace,
with no model at all.

Each scripted round becomes a real engine `Round` (token ids, draft and verify seconds, the
k in use), and the chat layer's own `AnswerMetrics` (over the engine's `SpecStats`) turns
the rounds into the figures the screen shows: acceptance, τ, α, per-position acceptance,
tokens/s are computed by the one implementation a real pair uses, never by the script.

Used by the pilot tests (deterministic rounds, a fake clock, injected failures), by the
demo mode (`specchat chat --demo`) and by the UI benchmark (thousands of tokens per
second on an absolute schedule, so the stream never slows down to wait for anyone). The
command line builds it and hands it to the TUI like a real pair's service. No torch
(engine/events.py and the statistics are torch-free), no Textual.
"""

from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable, Generator, Iterator

from specchat.chat.events import (AnswerDone, ChatEvent, ContextTrimmed, ReadingPrompt,
                                  RoundUpdate, StatsSnapshot, TokenSpan)
from specchat.chat.baseline import Baseline, Costs, SamplingParams
from specchat.chat.metrics import AnswerMetrics
from specchat.chat.verdict import IdentityCheck
from specchat.chat.service import PairInfo, Progress, ShouldStop
from specchat.engine.events import Round, TokenKind
from specchat.engine.params import K_MAX
from specchat.turn import Turn

SAMPLE_ANSWER = (
    "Speculative decoding lets a **small draft model** guess the next few tokens, and the "
    "large target model checks all of them in *one* forward pass.\n\n"
    "1. The draft proposes k tokens.\n2. The target verifies them at once.\n"
    "3. The longest agreeing prefix is kept, plus one token from the target.\n\n"
    "```python\nfor round in decoder.generate(prompt):\n    print(round.accepted)\n```\n\n"
    "With greedy decoding the output is exactly what the target would write alone.")
GHOSTS = (" maybe", " the", " perhaps", " a", " very", " quick", " it", " so")
ACCEPT_PATTERN = (4, 2, 0, 3, 4, 1, 4, 2)
SCRIPTED_DRAFT_S = 0.005
"""Reported draft time per drafted token (the wall clock is not used for it)."""
SCRIPTED_VERIFY_S = 0.065
"""Reported time of a one-token target forward."""
SCRIPTED_VERIFY_COST = (1.0, 1.3, 1.5, 1.7, 1.9)
"""Cost of a verify of 1, 2, … tokens relative to one token (wider ones cost the last): the
baseline reports the same for every width up to K_MAX + 1 (none is extended), so
scripted answers run at load ×1.00 of idle."""


def scripted_verify_s(width: int) -> float:
    return SCRIPTED_VERIFY_S * SCRIPTED_VERIFY_COST[min(width, len(SCRIPTED_VERIFY_COST)) - 1]


@dataclass(frozen=True)
class ScriptedRound:
    """One round of a script: drafts kept, drafts thrown away, and the target's token."""

    accepted: tuple[str, ...]
    rejected: tuple[str, ...]
    token: str | None
    kind: TokenKind = "resampled"


def token_id(word: str) -> int:
    """A stable id for a scripted token: the same word is the same token in every run."""
    return zlib.crc32(word.encode()) & 0xFFFF


def words(text: str) -> list[str]:
    """Split text into word-sized tokens that join back into the same text."""
    out: list[str] = []
    for piece in text.split(" "):
        out.append(piece if not out else " " + piece)
    return [w for w in out if w]


def live_script(tokens: list[str], k_now: Callable[[], int],
                pattern: tuple[int, ...] = ACCEPT_PATTERN) -> Iterator[ScriptedRound]:
    """Rounds that commit exactly `tokens`, reading k before each round (so a change
    applies from the next round), accepting pattern[i] of k drafts in round i."""
    i = index = 0
    while i < len(tokens):
        k = k_now()
        n = min(pattern[index % len(pattern)], k, len(tokens) - i - 1)
        full = n == k
        rejected = () if full or k == 0 else tuple(GHOSTS[(i + j) % len(GHOSTS)]
                                                    for j in range(k - n))
        kind: TokenKind = "target" if k == 0 else ("bonus" if full else "resampled")
        yield ScriptedRound(tuple(tokens[i:i + n]), rejected, tokens[i + n], kind)
        i += n + 1
        index += 1


@dataclass
class FakeConfig:
    """How the scripted service behaves; every field has a harmless default."""

    name: str = "fake"
    k: int = 4
    k_auto: bool = False
    """Play a `k = "auto"` pair: `k` is then only where it starts."""
    temperature: float = 0.0
    answer: str = SAMPLE_ANSWER
    """Text every answer commits (split into word tokens)."""
    tokens_per_s: float | None = None
    """Pace of the stream; None streams as fast as the consumer pulls."""
    load_s: float = 0.0
    load_steps: int = 1
    """Progress lines the load reports, spread over `load_s` (a real load reports its stages)."""
    load_error: str | None = None
    fail_at_round: int | None = None
    """Raise RuntimeError before this round (0-based) of every answer."""
    baseline_tokens_per_s: float | None = 20.0
    baseline_measured_at: float | None = None
    """Reported time of the baseline's measurement (None: now)."""
    baseline_s: float = 0.0
    """How long measuring the baseline takes (it stops early when asked to)."""
    baseline_passes: int = 1
    """Passes a baseline takes to settle (a real pair's: 3); scripted timings carry no noise."""
    clock: Callable[[], float] = time.perf_counter
    trim_every_answer: bool = False
    prompt_tokens: int = 0
    """Announce a prompt of this many tokens before each answer's first round (0: none)."""
    kept_tokens: int = 0
    """Of them, those the caches held from the answer before (not read)."""
    reading_s: float = 0.0
    """How long reading that prompt takes (it stops early when asked to)."""
    memory_bytes: int = 270_000_000
    stop_reason: str = "eos"
    """Why a scripted answer that plays to its end ended (context_full: the model's context)."""
    rounds: list[ScriptedRound] | None = field(default=None, repr=False)


class ScriptedService:
    """A `ConversationService` (chat/service.py) that plays a script."""

    def __init__(self, config: FakeConfig | None = None):
        self.config = config or FakeConfig()
        self.name = self.config.name
        self.busy = threading.Lock()
        self.k = self.config.k
        self.temperature = self.config.temperature
        self.system: str | None = None
        self._turns: list[Turn] = []
        self.k_auto = self.config.k_auto

    def load(self, progress: Progress) -> PairInfo:
        steps = max(1, self.config.load_steps)
        for step in range(steps):
            progress(f"loading scripted pair {self.name}"
                     + (f" ({step + 1}/{steps})" if steps > 1 else ""))
            deadline = time.perf_counter() + self.config.load_s / steps
            while time.perf_counter() < deadline:
                time.sleep(0.01)
        if self.config.load_error:
            raise RuntimeError(self.config.load_error)
        return PairInfo(self.name, "cpu", "float32", self.config.memory_bytes, self.k > 0,
                        self.k, self.temperature, 2048, self.config.load_s, "scripted fake pair")

    def measure_baseline(self, should_stop: ShouldStop, needed_context: int = 0) -> Baseline | None:
        self.baselines_started = getattr(self, "baselines_started", 0) + 1
        deadline = time.perf_counter() + self.config.baseline_s
        while time.perf_counter() < deadline:
            if should_stop():
                return None
            time.sleep(0.01)
        rate = self.config.baseline_tokens_per_s
        when = self.config.baseline_measured_at
        when = time.time() if when is None else when
        if rate is None:
            return None
        step = 1.0 / rate
        verify = {n: scripted_verify_s(n) / SCRIPTED_VERIFY_S * step for n in range(1, K_MAX + 2)}
        points = ((64, step), (max(512, needed_context + 256), step))
        return Baseline(self.sampling_params(), points,
                        Costs.of(verify, SCRIPTED_DRAFT_S), 256, when, self.config.baseline_s,
                        forward_points=((64, SCRIPTED_VERIFY_S),), min_decode_s=0.0,
                        settled_passes=self.config.baseline_passes)

    def sampling_params(self) -> SamplingParams:
        return SamplingParams(float(self.temperature))

    def float32_check(self, should_stop: ShouldStop) -> IdentityCheck | None:
        tokens = len(words(self.config.answer))
        return None if should_stop() else IdentityCheck(tokens, None)

    def answer(self, text: str, speculate: bool, should_stop: ShouldStop) -> Iterator[ChatEvent]:
        self._turns.append(Turn("user", text))
        if self.config.trim_every_answer:
            yield ContextTrimmed(1, 2048)
        if self.config.prompt_tokens:
            yield ReadingPrompt(self.config.prompt_tokens, self.config.kept_tokens)
            self._read_prompt(should_stop)
        try:
            done = yield from self._play(speculate, should_stop)
        except BaseException:
            self._turns.pop()
            raise
        self._turns.append(Turn("assistant", done.text))
        yield done

    def _read_prompt(self, should_stop: ShouldStop) -> None:
        deadline = time.perf_counter() + self.config.reading_s
        while time.perf_counter() < deadline and not should_stop():
            time.sleep(0.01)

    def race(self, should_stop: ShouldStop) -> Iterator[ChatEvent]:
        done = yield from self._play(False, should_stop)
        yield done

    def _rounds(self, speculate: bool) -> Iterator[ScriptedRound]:
        if self.config.rounds is not None and speculate:
            return iter(self.config.rounds)
        return live_script(words(self.config.answer), (lambda: self.k) if speculate else (lambda: 0))

    def _play(self, speculate: bool,
              should_stop: ShouldStop) -> Generator[RoundUpdate, None, AnswerDone]:
        metrics = AnswerMetrics(self.config.clock)
        spans: list[TokenSpan] = []
        started = time.perf_counter()
        for index, scripted in enumerate(self._rounds(speculate)):
            if should_stop():
                return self._done(spans, "stopped", metrics)
            if index == self.config.fail_at_round:
                raise RuntimeError(f"scripted failure at round {index}")
            played = engine_round(scripted, self.k if speculate else 0)
            metrics.record(played)
            update = RoundUpdate(*round_spans(scripted), played.draft_s * 1000,
                                 played.verify_s * 1000, metrics.snapshot())
            self._pace(started, metrics.spec.tokens)
            spans.extend(update.spans)
            yield update
        return self._done(spans, self.config.stop_reason, metrics)

    def _pace(self, started: float, tokens: int) -> None:
        """Sleep until the absolute time this many tokens are due (never drifts)."""
        if self.config.tokens_per_s:
            due = started + tokens / self.config.tokens_per_s
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)

    def _done(self, spans: list[TokenSpan], reason: str, metrics: AnswerMetrics) -> AnswerDone:
        text = "".join(s.text for s in spans if s.kind != "rejected")
        return AnswerDone(text, reason, metrics.snapshot(final=True), tuple(spans))

    def set_k(self, k: int) -> None:
        self.k, self.k_auto = k, False

    def set_temperature(self, temperature: float) -> None:
        self.temperature = temperature

    def reset(self, system: str | None, turns: list[Turn]) -> None:
        self.system, self._turns = system, [Turn(*turn) for turn in turns]

    def turns(self) -> list[Turn]:
        return list(self._turns)

    def drop_last_exchange(self) -> str | None:
        users = [i for i, turn in enumerate(self._turns) if turn.role == "user"]
        if not users:
            return None
        text = self._turns[users[-1]].text
        self._turns = self._turns[:users[-1]]
        return text


def engine_round(scripted: ScriptedRound, k: int) -> Round:
    """The engine's `Round` for a scripted one: the words' ids, the scripted seconds."""
    accepted = tuple(token_id(word) for word in scripted.accepted)
    rejected = tuple(token_id(word) for word in scripted.rejected)
    token = None if scripted.token is None else token_id(scripted.token)
    drafted = len(accepted) + len(rejected)
    return Round(accepted, rejected, token, scripted.kind, SCRIPTED_DRAFT_S * drafted,
                 scripted_verify_s(drafted + 1), k, fed=drafted + 1)


def round_spans(scripted: ScriptedRound,
                ) -> tuple[tuple[TokenSpan, ...], tuple[TokenSpan, ...], TokenSpan | None]:
    """(accepted, rejected, token) spans of a scripted round: the words as their own text."""
    accepted = tuple(TokenSpan(t, "accepted", token_id(t)) for t in scripted.accepted)
    rejected = tuple(TokenSpan(t, "rejected", token_id(t)) for t in scripted.rejected)
    token = (None if scripted.token is None
             else TokenSpan(scripted.token, scripted.kind, token_id(scripted.token)))
    return accepted, rejected, token
