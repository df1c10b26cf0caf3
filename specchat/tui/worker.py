"""What runs inside the thread workers: streaming one answer (or a race) and
loading a pair. Only `post_message` reaches the UI from here, and `should_stop`
(the worker's `is_cancelled`) is checked between rounds; no widget is touched.

Step mode and slow motion are read from a shared `Pacing` at every round, so
toggling them applies from the next round.

Rounds reach the UI in batches of at most one frame (`FRAME_S`): a fast pair ends dozens
of rounds a second, and a screen update for each costs the main thread more than a
round costs the model (on 2 cores the model's threads then lose a core to drawing).
A round that ends after a quiet spell is posted at once, so a slow pair streams round by
round; paced rounds (step mode, slow motion) are always posted one by one.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from textual.message_pump import MessagePump

from specchat.chat.events import AnswerDone, ChatEvent, ContextTrimmed, ReadingPrompt, RoundUpdate
from specchat.chat.service import ConversationService, ShouldStop, describe_error
from specchat.tui.messages import (AnswerFailed, AnswerFinished, AnswerNotStarted, BaselineMeasured,
                                   ContextNotice, IdentityChecked, LoadFailed, LoadProgress,
                                   PairLoaded, PromptReading, RoundArrived, StatsUpdated)

POLL_S = 0.02
FRAME_S = 0.1
"""Rounds ending within this long of the last post wait and go in one batch."""


@dataclass
class Pacing:
    """Demo pacing, written by the UI and read by the worker each round."""

    step: bool = False
    slow_ms: int = 0
    """Delay after each round; 0 is full speed."""


@dataclass
class Job:
    """What one answer worker streams: an `AnswerJob` or a `RaceJob`."""

    id: int
    service: ConversationService
    pacing: Pacing
    gate: threading.Event = field(default_factory=threading.Event)
    """Set by the UI to release a round held in step mode."""
    speculate: bool = True

    def events(self, should_stop: ShouldStop) -> Iterator[ChatEvent]:
        raise NotImplementedError


@dataclass
class AnswerJob(Job):
    """An answer to a user message: it becomes part of the conversation and the history."""

    text: str = ""

    def events(self, should_stop: ShouldStop) -> Iterator[ChatEvent]:
        return self.service.answer(self.text, self.speculate, should_stop)


@dataclass
class RaceJob(Job):
    """The last user message replayed target-only; the conversation is left alone."""

    speculate: bool = False

    def events(self, should_stop: ShouldStop) -> Iterator[ChatEvent]:
        return self.service.race(should_stop)


def stream_job(job: Job, app: MessagePump, gauges: MessagePump, should_stop: ShouldStop) -> None:
    """Run a job to its end, posting one message per round; every job ends with exactly one
    of `AnswerFinished`, `AnswerFailed` or `AnswerNotStarted`, or the chat would wait for it."""
    try:
        if not _acquire(job.service.busy, should_stop):
            app.post_message(AnswerNotStarted(job.id))
            return
        try:
            _stream(job, app, gauges, should_stop)
        finally:
            job.service.busy.release()
    except Exception as error:  # any failure in generation becomes a notification
        app.post_message(AnswerFailed(job.id, describe_error(error)))


@dataclass
class RoundBatch:
    """Rounds waiting to be posted: at most one batch per `FRAME_S`."""

    job: Job
    app: MessagePump
    gauges: MessagePump
    waiting: list[RoundUpdate] = field(default_factory=list)
    posted_at: float = float("-inf")

    def add(self, update: RoundUpdate) -> None:
        self.waiting.append(update)
        paced = self.job.pacing.step or self.job.pacing.slow_ms > 0
        if paced or time.perf_counter() - self.posted_at >= FRAME_S:
            self.post(paced)

    def post(self, paced: bool = False) -> None:
        if not self.waiting:
            return
        updates, self.waiting = tuple(self.waiting), []
        self.app.post_message(RoundArrived(self.job.id, updates))
        self.gauges.post_message(StatsUpdated(self.job.id, updates[-1].stats, at_once=paced))
        self.posted_at = time.perf_counter()


def _stream(job: Job, app: MessagePump, gauges: MessagePump, should_stop: ShouldStop) -> None:
    batch = RoundBatch(job, app, gauges)
    for event in job.events(should_stop):
        if isinstance(event, RoundUpdate):
            batch.add(event)
            _pause(job, bool(event.accepted or event.rejected), should_stop)
            continue
        batch.post()
        if isinstance(event, ContextTrimmed):
            app.post_message(ContextNotice(job.id, event))
        elif isinstance(event, ReadingPrompt):
            app.post_message(PromptReading(job.id, event.to_read, event.kept))
        elif isinstance(event, AnswerDone):
            gauges.post_message(StatsUpdated(job.id, event.stats, at_once=True))
            app.post_message(AnswerFinished(job.id, event))
    batch.post()


def _pause(job: Job, drafted: bool, should_stop: ShouldStop) -> None:
    """Hold a round with drafts in step mode until released; sleep in slow motion."""
    if job.pacing.step and drafted:
        while not job.gate.wait(POLL_S):
            if should_stop() or not job.pacing.step:
                break
        job.gate.clear()
    deadline = time.perf_counter() + job.pacing.slow_ms / 1000
    while time.perf_counter() < deadline and not should_stop():
        time.sleep(min(POLL_S, max(0.0, deadline - time.perf_counter())))


def _acquire(lock: threading.Lock, should_stop: ShouldStop) -> bool:
    """Wait for the model (a previous job finishing its round) unless stopped first."""
    while not lock.acquire(timeout=POLL_S):
        if should_stop():
            return False
    return True


MEASURING = "ready · measuring target-only speed (a question goes first)…"
"""The status while the baseline is measured: the pair answers at once all the same (a
question stops the measurement within one timed step, and it runs again when idle). On the
Qwen head pair a pass takes about 22 s and three are merged, so a status that did not say
ready kept a newcomer waiting a minute for nothing."""


def measure_service_baseline(load_id: int, service: ConversationService, app: MessagePump,
                             should_stop: ShouldStop, needed_context: int = 0) -> None:
    """Measure the target-only baseline of a loaded pair; always ends with a
    `BaselineMeasured` message (baseline None when it was stopped because the user asked
    something, or failed)."""
    baseline = None
    try:
        if _acquire(service.busy, should_stop):
            try:
                app.post_message(LoadProgress(load_id, MEASURING))
                baseline = service.measure_baseline(should_stop, needed_context)
            finally:
                service.busy.release()
    except Exception as error:
        app.post_message(LoadProgress(load_id, f"baseline failed: {describe_error(error)}"))
    app.post_message(BaselineMeasured(load_id, baseline))


def check_float32(service: ConversationService, app: MessagePump, should_stop: ShouldStop) -> None:
    """Run the float32 replay; always ends with an `IdentityChecked` message."""
    try:
        if not _acquire(service.busy, should_stop):
            app.post_message(IdentityChecked(None, "stopped"))
            return
        try:
            result = service.float32_check(should_stop)
        finally:
            service.busy.release()
    except Exception as error:
        app.post_message(IdentityChecked(None, describe_error(error)))
        return
    app.post_message(IdentityChecked(result, None if result else "stopped"))


class LoadSuperseded(BaseException):
    """A newer pick cancelled this load. A `BaseException`, like `KeyboardInterrupt`, so
    that no fallback inside the models (`except Exception`: a kernel that "cannot run here",
    a cache "damaged") mistakes it for a problem of the model."""


def load_service(load_id: int, service: ConversationService, app: MessagePump,
                 should_stop: ShouldStop) -> None:
    """Load a pair and announce it (the app measures its baseline once it is idle). A load
    that a newer one superseded stops at its next progress step, and says nothing: the
    cores and memory go to the pair the user picked. A stage under way finishes first;
    every cache a load writes is renamed into place, as for a user who quits mid-load."""
    def progress(text: str) -> None:
        if should_stop():
            raise LoadSuperseded
        app.post_message(LoadProgress(load_id, text))

    try:
        info = service.load(progress)
    except LoadSuperseded:
        return
    except Exception as error:
        app.post_message(LoadFailed(load_id, service.name, describe_error(error)))
        return
    app.post_message(PairLoaded(load_id, service, info))
