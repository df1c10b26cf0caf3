"""Loading pairs and measuring their target-only baselines, in one owner.

`PairLoading` starts the load and baseline workers (thread workers of the app),
numbers the loads so stale messages can be told apart, and keeps the baselines
measured per (load, sampling settings), each refined by further passes while the chat
is idle until it is settled (chat/baseline.py `merged`). It never touches a widget: workers post
`LoadProgress`, `LoadFailed`, `PairLoaded` and `BaselineMeasured` to the app, which
decides what the screen shows. Textual only; never imports models or torch.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

from textual.app import App
from textual.worker import get_current_worker

from specchat.chat.baseline import Baseline, merged
from specchat.chat.service import ConversationService, describe_error
from specchat.tui.messages import BaselineMeasured, LoadFailed
from specchat.tui.worker import measure_service_baseline, load_service

ServiceFactory = Callable[[str], ConversationService]
CONTEXT_MARGIN = 512
"""Tokens of room past an answer that the next baseline must cover."""


def _with_stop(job: Callable, *args) -> None:
    """Run a worker function with the current worker's cancellation as `should_stop`."""
    worker = get_current_worker()
    job(*args, lambda: worker.is_cancelled)


class PairLoading:
    """The loads and the baselines of the app's pairs."""

    def __init__(self, app: App, factory: ServiceFactory):
        self.app, self.factory = app, factory
        self.load_id = 0
        """The newest load started."""
        self.current_load_id = 0
        """The load whose pair answers now."""
        self.baselines: dict[tuple, Baseline] = {}
        """(load id, sampling params) -> the target-only baseline measured for it."""
        self.needed_context = 0
        """How far the conversation's contexts reach: the baseline must cover it."""
        self.measuring = False

    def start(self, pair_name: str) -> None:
        """Build the pair's service and load it in a worker (`PairLoaded` or `LoadFailed`)."""
        self.load_id += 1
        try:
            service = self.factory(pair_name)
        except Exception as error:
            self.app.post_message(LoadFailed(self.load_id, pair_name, describe_error(error)))
            return
        self.app.run_worker(partial(_with_stop, load_service, self.load_id, service, self.app),
                            thread=True, group="load", exclusive=True, exit_on_error=False)

    def wanted(self, load_id: int) -> bool:
        """Whether a load's messages still matter (the newest load or the one answering)."""
        return load_id in (self.load_id, self.current_load_id)

    def baseline(self, service: ConversationService | None) -> Baseline | None:
        """The baseline for the service's next answer, if measured."""
        return self.baselines.get(self._key(service))

    def forget(self, service: ConversationService) -> None:
        """Drop the baseline of the current settings (to measure it again)."""
        self.baselines.pop(self._key(service), None)

    def reach(self, context_tokens: int) -> None:
        """An answer reached this far: later baselines must cover it, with room to spare."""
        self.needed_context = max(self.needed_context, context_tokens + CONTEXT_MARGIN)

    def measure_baseline_if_stale(self, service: ConversationService) -> None:
        """Measure target-only costs in a worker (`BaselineMeasured`) unless a fresh baseline exists
        or a measurement runs; the caller makes sure that no answer is streaming."""
        baseline = self.baseline(service)
        fresh = (baseline is not None and baseline.settled
                 and self.needed_context <= baseline.max_context * 1.25)
        if self.measuring or fresh:
            return
        self.measuring = True
        job = partial(_with_stop, self._measure, self.current_load_id, service, self.needed_context)
        self.app.run_worker(job, thread=True, group="baseline", exclusive=True,
                            exit_on_error=False)

    def _measure(self, load_id: int, service, needed_context: int, should_stop) -> None:
        measure_service_baseline(load_id, service, self.app, should_stop, needed_context)

    def interrupt(self) -> None:
        """A question goes first: stop a running measurement (it runs again when idle)."""
        if self.measuring:
            self.app.workers.cancel_group(self.app, "baseline")

    def baseline_measured(self, message: BaselineMeasured) -> bool:
        """Keep a measured baseline, merged with the earlier passes of the same settings;
        whether it belongs to the pair answering now."""
        self.measuring = False
        if message.baseline is not None:
            key = (message.load_id, message.baseline.sampling)
            earlier = self.baselines.get(key)
            self.baselines[key] = (message.baseline if earlier is None
                                      else merged(earlier, message.baseline))
        return message.load_id == self.current_load_id

    def _key(self, service: ConversationService | None) -> tuple:
        return (self.current_load_id, service.sampling_params() if service else None)
