"""A chat session over a loaded pair: renders the conversation, runs the engine,
and turns each `Round` into coloured text spans and live statistics.

`ChatSession.answer` is a generator of chat events (events.py); it is what the
CLI prints, the TUI's worker posts and the benchmark times. The decoding knobs
live in `settings` (an engine `Settings`), read at every round, so a UI may
change k or the temperature while an answer streams. Knows nothing about Textual.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

from specchat.chat.baseline import Baseline
from specchat.chat.conversation import Conversation, fit_prompt, render_prompt
from specchat.chat.cross import alignment_of
from specchat.chat.detok import IncrementalDetokenizer
from specchat.chat.events import (AnswerDone, ChatEvent, ContextTrimmed, ReadingPrompt,
                                  RoundUpdate, TokenSpan)
from specchat.chat.metrics import AnswerMetrics
from specchat.chat.pair import Pair
from specchat.chat.remembered_costs import remember_costs
from specchat.chat.decoding import decoder_for
from specchat.engine import Decoder, Event, Finished, Round, Settings
from specchat.engine.adaptive import AdaptiveK, settings_for
from specchat.engine.costs import Costs
from specchat.errors import ContextFull, one_line
from specchat.token_kinds import TokenKind


@dataclass
class RoundText:
    """Text of a round's tokens, rejected ones decoded on their own in context."""

    accepted: tuple[TokenSpan, ...]
    rejected: tuple[TokenSpan, ...]
    token: TokenSpan | None


def spans_of_round(event: Round, detok: IncrementalDetokenizer,
                   alignment: tuple[str, ...] = ()) -> RoundText:
    """Decode a round: accepted drafts and the target token are committed to the detokenizer.
    `alignment`: how each draft lines up with a cross-tokenizer draft's own tokens."""
    margins = list(event.margins) + [None] * (len(event.committed) - len(event.margins))
    aligned = list(alignment) + [""] * (event.drafted - len(alignment))
    accepted = tuple(TokenSpan(detok.push(t), "accepted", t, m, a)
                     for t, m, a in zip(event.accepted, margins, aligned))
    ghosts = detok.peek(list(event.rejected))
    rejected = tuple(TokenSpan(text, "rejected", t, alignment=a) for text, t, a in
                     zip(ghosts, event.rejected, aligned[len(event.accepted):]))
    token = None
    if event.token is not None:
        kind: TokenKind = event.token_kind
        token = TokenSpan(detok.push(event.token), kind, event.token, margins[len(event.accepted)])
    return RoundText(accepted, rejected, token)


class ChatSession:
    """One conversation with a loaded pair (chat/pair.py's `Pair` protocol)."""

    def __init__(self, pair: Pair, system: str | None = None, settings: Settings | None = None,
                 seed: int | None = None):
        self.pair = pair
        self.conversation = Conversation(system=system)
        config = pair.config
        self.settings = settings or settings_for(config.k, config.sampling)
        self.speculate = True
        """False decodes target-only (k = 0) regardless of `settings.k`."""
        self.clock = time.perf_counter
        """The one clock of every rate (injectable for tests)."""
        self.seed = secrets.randbits(63) if seed is None else seed
        """The sampling seed: given, or drawn from the OS (an unseeded Generator always
        starts from the same state, which is not random)."""
        self.generator = torch.Generator(device=pair.target.device).manual_seed(self.seed)
        self.baseline_costs: Costs | None = None
        """The step costs of the latest baseline (or timed before the first answer): k = "auto"'s
        starting point."""
        self.keep_limit: int | None = None
        """How many leading prompt tokens an answer may keep from the caches (None: all they
        hold of it, engine/held_tokens.py; a race keeps what the answer it races kept)."""
        self.last_kept = 0
        """How many prompt tokens the latest answer kept (not read again)."""

    def decoder(self) -> Decoder:
        return decoder_for(self.pair, self.speculate, settings=self.settings)

    def answer(self, user_text: str, max_new_tokens: int = 512,
               should_stop: Callable[[], bool] = lambda: False) -> Iterator[ChatEvent]:
        """Add the user's message, stream the answer, and add it to the conversation."""
        self.conversation.add("user", user_text)
        try:
            yield from self._stream(max_new_tokens, should_stop)
        except BaseException:
            self.conversation.turns.pop()
            raise

    def start_auto(self, progress: Callable[[str], None] = lambda _: None) -> None:
        """Hand k = "auto" the pair's step costs: known, remembered from an earlier start on
        this machine, or timed now (seconds on a CPU; `progress` says so). Loading a pair does
        it (chat/pair_service.py, commands/run.py), so an answer waits for it only when k
        became "auto" after a target-only or fixed-k start."""
        if self.speculate:
            from specchat.chat.baseline_timing import start_auto_from_baseline

            self.baseline_costs = start_auto_from_baseline(self.pair, self.settings,
                                                           self.baseline_costs, progress)

    def _stream(self, max_new_tokens: int,
                should_stop: Callable[[], bool]) -> Iterator[ChatEvent]:
        started = self.clock()  # TTFT counts whatever the answer waits for, k = auto's timing too
        self.start_auto()
        context = self.pair.context_length
        prompt, dropped = fit_prompt(self.conversation, self.pair.tokenizer, context,
                                     min(max_new_tokens, context // 2))
        # target-only decoding is a decoder without a drafter (k = 0) reading the same
        # live settings, so a temperature change applies from the next round either way
        decoder = self.decoder()
        keep = len(prompt) if self.keep_limit is None else self.keep_limit
        self.last_kept = kept = decoder.prepare(prompt, keep)
        metrics = AnswerMetrics(self.clock, prompt_tokens=len(prompt), kept_tokens=kept)
        metrics.submitted = started  # TTFT counts rendering the prompt too
        if dropped:
            yield ContextTrimmed(dropped, context)
        yield ReadingPrompt(len(prompt), kept)
        budget = min(max_new_tokens, context - len(prompt))
        detok = IncrementalDetokenizer(self.pair.tokenizer, prompt)
        spans: list[TokenSpan] = []
        events = decoder.generate(prompt, self.settings, budget, self.generator, should_stop,
                                  keep=keep)
        for event in survive_failure(events):
            if isinstance(event, Finished):
                yield self._finish(context_bound(event, budget, max_new_tokens), detok, spans,
                                   metrics)
                return
            if isinstance(event, RoundFailed):
                yield self._finish("failed", detok, spans, metrics, event.error)
                return
            metrics.record(event)
            text = spans_of_round(event, detok, alignment_of(decoder.drafter))
            update = RoundUpdate(text.accepted, text.rejected, text.token, event.draft_s * 1000,
                                 event.verify_s * 1000, metrics.snapshot())
            spans.extend(update.spans)
            held_from = self.clock()
            yield update
            metrics.hold(self.clock() - held_from)  # pauses are not decoding time

    def _finish(self, stop_reason: str, detok: IncrementalDetokenizer, spans: list[TokenSpan],
                metrics: AnswerMetrics, error: str = "") -> AnswerDone:
        tail = detok.flush()
        if tail and spans:
            last = max(i for i, s in enumerate(spans) if s.kind != "rejected")
            spans[last] = dataclasses.replace(spans[last], text=spans[last].text + tail)
        text = "".join(s.text for s in spans if s.kind != "rejected")
        self.conversation.add("assistant", text)
        return AnswerDone(text, stop_reason, metrics.snapshot(final=True), tuple(spans), error)

    # ----- the conversation service's other jobs ------------------------------------------

    def replay_last(self, max_new_tokens: int = 512, should_stop: Callable[[], bool] = lambda: False,
                    speculate: bool = False) -> Iterator[ChatEvent]:
        """Answer the last user message again on a scratch copy of the conversation (same
        system prompt, history and sampling), target-only unless `speculate`: the race.
        It keeps as much of the prompt from the caches as the answer it races did, so both
        read the same new tokens. The conversation itself is left alone."""
        turns = self.conversation.turns
        last = max(i for i, turn in enumerate(turns) if turn.role == "user")
        scratch = ChatSession(self.pair, self.conversation.system, self.settings_copy(),
                              seed=self.seed)
        scratch.keep_limit = self.last_kept
        scratch.conversation.turns = list(turns[:last])
        scratch.speculate = speculate
        yield from scratch.answer(turns[last].text, max_new_tokens, should_stop)

    def settings_copy(self) -> Settings:
        """The same k and sampling, with a fresh adaptive policy if k is "auto"."""
        config_k = "auto" if self.settings.k_policy is not None else self.settings.k
        return settings_for(config_k, self.settings.sampling, prior=self.baseline_costs)

    def measure_baseline(self, should_stop: Callable[[], bool] = lambda: False,
                         needed_context: int = 0) -> Baseline | None:
        """Measure the target-only `Baseline` for the current sampling settings
        (chat/baseline_timing.py), covering contexts up to `needed_context`; None if stopped
        first. Its step costs become k = "auto"'s starting point. The timing fills the
        caches with its own tokens, so the conversation is read back into them after it
        (`read_conversation`), unless a question is waiting."""
        from specchat.chat.baseline_timing import contexts_for, measure_baseline

        contexts = contexts_for(needed_context, self.pair.context_length)
        baseline = measure_baseline(self.pair, self.settings.sampling, should_stop, contexts)
        if baseline is not None and baseline.costs is not None:
            self.baseline_costs = baseline.costs
            remember_costs(self.pair, baseline.costs)  # what the pair's next start begins from
            policy = self.settings.k_policy
            if isinstance(policy, AdaptiveK):
                policy.use_prior(self.baseline_costs)  # the latest timing wins over an older one
        if not should_stop():
            self.read_conversation(should_stop)  # the timing used the models' caches
        return baseline

    def read_conversation(self, should_stop: Callable[[], bool] = lambda: False) -> int:
        """Read the conversation so far into the caches while idle, so that the next question
        reads only its own tokens; how many tokens it covers (0: nothing to read, or too long
        to leave an answer room). Stops between chunks when `should_stop` says so."""
        if not self.conversation.turns:
            return 0
        tokens = render_prompt(self.pair.tokenizer, self.conversation.messages(), answer=False)
        if len(tokens) + self.pair.context_length // 2 > self.pair.context_length:
            return 0
        self.decoder().read(tokens, should_stop)
        return len(tokens)


def context_bound(event: Finished, budget: int, max_new_tokens: int) -> str:
    """The answer's stop reason. The engine stops at the budget it is given; where the
    context's room, not the length asked for, set that budget, the context was full."""
    if event.stop_reason == "max_tokens" and budget < max_new_tokens:
        return "context_full"
    return event.stop_reason


@dataclass(frozen=True)
class RoundFailed:
    """A round ran out of memory or context: the answer ends there, the chat goes on."""

    error: str


def survive_failure(events: Iterator[Event]) -> Iterator[Event | RoundFailed]:
    """The engine's events, ending in a `RoundFailed` where a round runs out of GPU memory
    or of KV cache (both recoverable: the next answer keeps only what each cache's own record
    vouches for, engine/held_tokens.py, and reads the rest again)."""
    try:
        yield from events
    except torch.OutOfMemoryError as error:
        release_cached_memory()
        yield RoundFailed(f"out of GPU memory during a round ({one_line(error, 200)}): "
                          "shorten the conversation, lower k, or use a smaller or 4bit model")
    except ContextFull as error:
        yield RoundFailed(str(error))


def release_cached_memory() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

