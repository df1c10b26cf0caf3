"""Which pair answers: what the screen shows while pairs load and baselines are
measured, and when a loaded pair takes over (at once, or once the streaming answer
ends, carrying the conversation over).

`PairSwitch` starts loads through `PairLoading` and decides on the messages its
workers post (the app hands them over); it sets the app's `service`, `info` and
`pair_name`, the one place they change. A load that fails stays on screen (the problem
lines) until the user picks another pair; while no pair answers, a message is refused in
the input with the reason (`refusal`), never taken and left unanswered. Reaches the app through `PairHost`; never
imports models or torch.
"""

from __future__ import annotations

import gc
from typing import Any, Protocol

from specchat.chat.baseline import Baseline
from specchat.chat.service import ConversationService, PairInfo
from specchat.tui.messages import BaselineMeasured, LoadFailed, LoadProgress, PairLoaded
from specchat.tui.pair_loading import PairLoading, ServiceFactory
from specchat.turn import Turn


class PairTranscript(Protocol):
    """What the pair switch needs of the transcript (tui/answers.py's `ChatTranscript`,
    named by its parts: that module imports this one)."""

    @property
    def job(self) -> object | None:
        """The answer or race streaming now, if any."""
        ...
    @property
    def pending_turns(self) -> list[Turn]: ...
    def pair_ready(self) -> None: ...
    def pair_failed(self, reason: str) -> None: ...


class PairHost(Protocol):
    """What the pair switch needs of the app."""

    service: ConversationService | None
    info: PairInfo | None
    pair_name: str
    sub_title: str
    @property
    def transcript(self) -> PairTranscript: ...
    settings: Any
    gauges: Any
    chat_screen: Any

    def notify(self, message: str, **options: Any) -> None: ...
    def show_load_failure(self, text: str | None) -> None: ...


class PairSwitch:
    """Loads, baselines and take-overs of the app's pair."""

    def __init__(self, app: PairHost, loading: PairLoading):
        self.app, self.loading = app, loading
        self.waiting: PairLoaded | None = None
        """A pair that loaded while an answer streamed: it takes over when the answer ends."""
        self.failure: str | None = None
        """Why the pair picked last did not load: on screen until the user picks another."""

    @classmethod
    def over(cls, app, factory: ServiceFactory) -> PairSwitch:
        return cls(app, PairLoading(app, factory))

    def start(self, pair_name: str) -> None:
        self.failure = None
        self.app.show_load_failure(None)
        self.app.gauges.status = f"loading {pair_name}…"
        self.loading.start(pair_name)

    def switch(self, pair_name: str) -> None:
        self.app.notify(f"loading {pair_name} in the background; the current pair keeps answering")
        self.start(pair_name)

    def _idle(self) -> bool:
        return self.app.transcript.job is None

    # ----- what the workers post -----------------------------------------------------------

    def progress(self, message: LoadProgress) -> None:
        if self.loading.wanted(message.load_id):
            self.app.gauges.status = message.text

    def failed(self, message: LoadFailed) -> None:
        if message.load_id != self.loading.load_id:
            return
        app = self.app
        usable = "the current pair keeps working" if app.service else "pick another pair with F3"
        self.failure = f"cannot load pair '{message.pair}': {message.error} ({usable})"
        app.gauges.status = f"load failed: {message.pair}"
        app.notify(self.failure, severity="error", timeout=12)
        app.show_load_failure(self.failure)
        app.transcript.pair_failed(self.failure)

    def refusal(self) -> str | None:
        """Why a message cannot be sent now (no pair answers, and the one picked did not
        load), or None: it is sent, or waits for the pair that loads."""
        if self.app.service is None and self.failure is not None:
            return f"not sent: {self.failure}"
        return None

    def loaded(self, message: PairLoaded) -> None:
        if message.load_id != self.loading.load_id:
            return
        if not self._idle():
            self.waiting = message
            self.app.gauges.status = f"{message.info.name} ready: switching after this answer"
            return
        self._adopt(message)

    def idle(self) -> None:
        """The answer ended: a waiting pair takes over, or a baseline is measured."""
        if not self._idle():
            return  # another answer started meanwhile: its end decides
        waiting, self.waiting = self.waiting, None
        if waiting is not None:
            self._adopt(waiting)
        else:
            self.maybe_measure_baseline()

    def _adopt(self, loaded: PairLoaded) -> None:
        """Make a loaded pair the one that answers, carrying the conversation over."""
        app = self.app
        previous, service, info = app.service, loaded.service, loaded.info
        service.reset(app.settings.system,
                      previous.turns() if previous else app.transcript.pending_turns)
        if previous is not None:
            self.loading.interrupt()  # its baseline no longer matters: the new pair's goes first
        app.service, app.info, self.loading.current_load_id = service, info, loaded.load_id
        app.pair_name = app.sub_title = info.name
        app.gauges.info = info
        for legend in app.chat_screen.query("#legend"):
            legend.refresh()  # a cross-tokenizer pair's legend names its mark
        app.settings.adopt(service, info, first=previous is None)
        app.gauges.baseline = self.baseline()
        app.gauges.status = f"ready · loaded in {info.load_s:.1f} s"
        if previous is not None:
            app.gauges.forget_answer()
            app.notify(f"now answering with {info.name}")
        app.transcript.pair_ready()
        del previous  # the replaced pair: only a collection frees it
        collect_replaced_pair()
        self.maybe_measure_baseline()

    def baseline_measured(self, message: BaselineMeasured) -> None:
        current = self.loading.baseline_measured(message)
        if not current:  # a replaced pair's: the pair answering now may be waiting its turn
            self.maybe_measure_baseline()
            return
        if not self._idle():
            return
        gauges = self.app.gauges
        if message.baseline is None:
            gauges.status = "ready · baseline not measured (palette: Remeasure the baseline)"
            return
        baseline = gauges.baseline = self.baseline()
        gauges.status = f"ready · target-only measured in {message.baseline.measure_s:.1f} s" + (
            "" if baseline is None else passes_text(baseline))
        self.maybe_measure_baseline()  # a further pass, or the settings changed meanwhile

    # ----- baselines -----------------------------------------------------------------------

    def baseline(self) -> Baseline | None:
        """The baseline for the next answer's sampling settings, if measured."""
        return self.loading.baseline(self.app.service)

    def maybe_measure_baseline(self) -> None:
        """Measure target-only costs while nothing else runs; a new question interrupts it."""
        if self.app.service is not None and self._idle():
            self.loading.measure_baseline_if_stale(self.app.service)

    def refresh_baseline(self) -> None:
        """The sampling settings changed: show their baseline, measure it if missing."""
        if self._idle():
            self.app.gauges.baseline = self.baseline()
            self.maybe_measure_baseline()

    def remeasure_baseline(self) -> None:
        """Measure target-only speed again (after the current answer, if one streams)."""
        if self.app.service is None:
            self.app.notify("no pair loaded yet", severity="warning")
            return
        self.loading.forget(self.app.service)
        self.maybe_measure_baseline()


def collect_replaced_pair() -> None:
    """Free a pair that no longer answers, then freeze the collector's view again.

    The chat keeps its long-lived objects out of the garbage collector's passes
    (`gc.freeze`: shorter pauses while tokens stream). A model's objects refer to each
    other, so a replaced pair is freed only by a collection, and a frozen object is never
    collected: freezing the new pair with the old one still in view kept every replaced
    pair in memory (1.6 GB more at each switch to the Qwen2.5-Coder head pair and back)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def passes_text(baseline: Baseline) -> str:
    """How settled a baseline is, for the status line."""
    if baseline.settled:
        return f" ({baseline.passes} passes)" if baseline.passes > 1 else ""
    return f" (pass {baseline.passes} of {baseline.settled_passes}; refining while idle)"
