"""The specchat Textual app: wiring between the chat screen, the backend's
workers, the gauges and the history.

`create_app` is the factory the CLI and the tests call. The app holds one
backend (a loaded pair); answers run in one thread worker each (group
"answer", exclusive), pair loading in another ("load"). Messages from workers
carry a job or load id, and stale ones are dropped. Textual only: torch is
never imported here, the real backend imports it inside its worker.
"""

from __future__ import annotations

import asyncio
import gc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from textual import work
from textual.app import App, SystemCommand
from textual.worker import get_current_worker

from specchat.theme_files import DEFAULT_THEME
from specchat.tui.actions import ActionsMixin
from specchat.chat.baseline import Baseline, gauge_speedup
from specchat.chat.service import ConversationService as Backend, PairInfo
from specchat.tui.chat_screen import ChatInput, ChatScreen
from specchat.tui.commands import SpecchatCommands
from specchat.tui.gauges import Gauges
from specchat.tui.messages import (AnswerFailed, AnswerFinished, Calibrated, ContextNotice,
                                   LoadFailed, LoadProgress, PairLoaded, RoundArrived)
from specchat.tui.recorder import HistoryRecorder
from specchat.tui.themes import (TOKEN_FALLBACKS, Preferences, load_preferences,
                                 load_textual_themes, save_preferences)
from specchat.tui.transcript import AnswerView, Notice, TokenText, UserTurn
from specchat.tui.pair_loading import PairLoading
from specchat.tui.worker import AnswerJob, Job, Pacing, RaceJob, check_float32, stream_job

BackendFactory = Callable[[str], Backend]
"""Pair name -> its conversation service (the CLI builds it; its models load in a worker)."""
GC_THRESHOLDS = (20_000, 50, 1_000)
"""Rarer collections: a full one over Textual's objects stalls the screen for a tenth of a
second on a busy CPU, long enough to see while thousands of tokens a second stream in."""


class WorkerThreads(ThreadPoolExecutor):
    """The loop's executor for thread workers. Closing the app does not wait for a round (or a
    model load) that is still running: the worker was cancelled and its thread is abandoned,
    so quitting mid-answer takes well under a second."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=True)


class SpecchatApp(ActionsMixin, App):
    """Chat with a draft/target pair and watch every token's fate."""

    CSS_PATH = Path(__file__).parent / "app.tcss"
    TITLE = "specchat"
    COMMANDS = App.COMMANDS | {SpecchatCommands}

    def __init__(self, backend_factory: BackendFactory, pairs: list[tuple[str, str]],
                 pair_name: str, theme: str | None = None, k: int | None = None,
                 temperature: float | None = None, system: str | None = None,
                 history_path: Path | None = None, preferences_path: Path | None = None):
        super().__init__()
        self.pairs = pairs
        self.pair_name = pair_name
        self.preferences_path = preferences_path
        self.preferences: Preferences = load_preferences(preferences_path)
        self.spec_themes = load_textual_themes()
        self.requested_theme = theme
        self.cli_k, self.cli_temperature = k, temperature
        self.system = system
        self.history_path = history_path
        self.backend: Backend | None = None
        self.info: PairInfo | None = None
        self.loading = PairLoading(self, backend_factory)
        self.waiting_backend: tuple[int, Backend, PairInfo] | None = None
        self.job: Job | None = None
        self.job_counter = 0
        self.answer_view: AnswerView | None = None
        self.last_answer: AnswerView | None = None
        self.last_speculative = None
        """(AnswerDone, gauge speedup) of the last speculative answer: what a race compares."""
        self.queued_prompt: str | None = None
        self.pending_turns: list[tuple[str, str]] = []
        self.held_round = None
        self.chat_screen = ChatScreen()
        self.failed: tuple[AnswerView, str] | None = None
        """The last answer if it failed, and its message, so that regenerate retries it."""
        self.pacing = Pacing()
        self.speculate = True
        self.ghosts = self.preferences.ghosts

    # ----- startup -------------------------------------------------------------------------

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(TOKEN_FALLBACKS)

    def get_default_screen(self) -> ChatScreen:
        return self.chat_screen

    def on_mount(self) -> None:
        asyncio.get_running_loop().set_default_executor(
            WorkerThreads(max_workers=4, thread_name_prefix="specchat-worker"))
        for theme in self.spec_themes.values():
            self.register_theme(theme)
        self.set_theme(self.requested_theme or self.preferences.theme, remember=False)
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self.recorder = HistoryRecorder(self.history_path, self._history_error)
        self.recorder.new_chat(self.system)

    def on_ready(self) -> None:
        """The screen is up and takes typing; now start loading the pair in the background."""
        gc.freeze()  # startup's objects leave the collector's view: shorter full collections
        gc.set_threshold(*GC_THRESHOLDS)
        self.start_loading(self.pair_name)

    def on_unmount(self) -> None:
        if hasattr(self, "recorder"):
            self.recorder.close()

    def get_system_commands(self, screen) -> list[SystemCommand]:
        """Textual's own commands, less its theme picker (ours lists specchat themes)."""
        return [c for c in super().get_system_commands(screen) if "theme" not in c.title.lower()]

    @property
    def gauges(self) -> Gauges:
        return self.chat_screen.gauges

    @property
    def transcript(self):
        return self.chat_screen.transcript

    def _history_error(self, text: str) -> None:
        self.notify(text, severity="warning", timeout=8)

    # ----- themes --------------------------------------------------------------------------

    def set_theme(self, name: str, remember: bool = True) -> None:
        if name not in self.spec_themes:
            self.notify(f"unknown theme '{name}'; using {DEFAULT_THEME}", severity="warning")
            name = DEFAULT_THEME if DEFAULT_THEME in self.spec_themes else next(iter(self.spec_themes))
        self.theme = name
        if remember:
            self.preferences.theme = name
            save_preferences(self.preferences, self.preferences_path)

    def _theme_changed(self, theme) -> None:
        for widget in self.query(TokenText):
            widget.restyle()
        for widget in self.query("#legend"):
            widget.refresh()

    # ----- loading -------------------------------------------------------------------------

    def start_loading(self, pair_name: str) -> None:
        self.gauges.status = f"loading {pair_name}…"
        self.loading.start(pair_name)

    def recalibrate(self) -> None:
        """Measure target-only speed again (after the current answer, if one streams)."""
        if self.backend is None:
            self.notify("no pair loaded yet", severity="warning")
            return
        self.loading.forget(self.backend)
        self._maybe_calibrate()

    def current_baseline(self) -> Baseline | None:
        """The baseline for the next answer's sampling settings, if measured."""
        return self.loading.baseline(self.backend)

    def _maybe_calibrate(self) -> None:
        """Measure target-only costs while nothing else runs; a new question interrupts it."""
        if self.backend is not None and self.job is None:
            self.loading.calibrate_if_stale(self.backend)

    def on_load_progress(self, message: LoadProgress) -> None:
        if self.loading.wanted(message.load_id):
            self.gauges.status = message.text

    def on_load_failed(self, message: LoadFailed) -> None:
        if message.load_id != self.loading.load_id:
            return
        usable = "the current pair keeps working" if self.backend else "pick another pair with F3"
        self.gauges.status = f"load failed: {message.pair}"
        self.notify(f"cannot load pair '{message.pair}': {message.error} ({usable})",
                    severity="error", timeout=12)
        if self.backend is None and self.queued_prompt is not None:
            self.queued_prompt = None
            self._mount(Notice("the model did not load: your message was not answered", "error"))

    def on_pair_loaded(self, message: PairLoaded) -> None:
        if message.load_id != self.loading.load_id:
            return
        if self.job is not None:
            self.waiting_backend = (message.load_id, message.backend, message.info)
            self.gauges.status = f"{message.info.name} ready: switching after this answer"
            return
        self._adopt(message.load_id, message.backend, message.info)
        gc.freeze()  # the model's (many, long-lived) objects too

    def _adopt(self, load_id: int, backend: Backend, info: PairInfo) -> None:
        """Make a loaded pair the one that answers, carrying the conversation over."""
        previous = self.backend
        backend.reset(self.system, previous.turns() if previous else self.pending_turns)
        self.backend, self.info, self.loading.current_load_id = backend, info, load_id
        self.pair_name = info.name
        first = previous is None
        if self.cli_k is not None and first:
            backend.set_k(self.cli_k)  # a fixed k replaces the pair's adaptive policy
        use_cli = self.cli_temperature is not None and first
        backend.set_temperature(self.cli_temperature if use_cli else info.temperature)
        gauges = self.gauges
        gauges.info = info
        self.show_settings()
        gauges.calibration = self.current_baseline()
        gauges.status = f"ready · loaded in {info.load_s:.1f} s"
        self.sub_title = info.name
        if previous is not None:
            self.notify(f"now answering with {info.name}")
        if self.queued_prompt is not None:
            text, self.queued_prompt = self.queued_prompt, None
            self._start_answer(text)
        self._maybe_calibrate()

    def on_calibrated(self, message: Calibrated) -> None:
        current = self.loading.calibrated(message)
        if message.calibration is None:
            if self.job is None and current:
                self.gauges.status = "ready · calibration did not finish (palette: Recalibrate)"
            return
        baseline = message.calibration
        if current and self.job is None:
            self.gauges.calibration = self.current_baseline()
            self.gauges.status = f"ready · target-only measured in {baseline.measure_s:.1f} s"
            self._maybe_calibrate()  # the settings may have changed meanwhile

    # ----- answering -----------------------------------------------------------------------

    def on_chat_input_submitted(self, message: ChatInput.Submitted) -> None:
        text = message.text.strip()
        if not text:
            return
        if self.job is not None:
            self.notify("an answer is streaming: Esc stops it", severity="warning")
            return
        self.chat_screen.message_box.clear()
        self._mount(UserTurn(text))
        self.recorder.user(text, self.pair_name)
        if self.backend is None:
            self.queued_prompt = text
            self.gauges.status = "your message will be answered once the pair has loaded…"
            return
        self._start_answer(text)

    def on_chat_input_stop_requested(self) -> None:
        self.action_stop()

    def _start_answer(self, text: str) -> None:
        self.failed = None
        speculate = self.speculate and bool(self.info and self.info.has_drafter)
        mode = f"speculative k={self.backend.k}" if speculate else "target only"
        self.job_counter += 1
        job = AnswerJob(self.job_counter, self.backend, self.pacing, speculate=speculate, text=text)
        self._start_job(job, f"{self.pair_name} · {mode}")
        self.recorder.start_answer(mode, self.pair_name)

    def _start_job(self, job: Job, label: str) -> None:
        self.loading.interrupt()  # the question goes first
        self.job = job
        race = isinstance(job, RaceJob)
        self.answer_view = AnswerView(label, self.ghosts)
        self._mount(self.answer_view)
        gauges = self.gauges
        gauges.start_job(self.job.id)
        gauges.mode = "race" if race else ("speculative" if job.speculate else "target-only")
        gauges.status = "racing target-only…" if race else "answering…"
        gauges.sampling = self.backend.sampling_key()
        gauges.calibration = self.current_baseline()
        self._answer_worker(self.job)

    @work(thread=True, group="answer", exclusive=True, exit_on_error=False)
    def _answer_worker(self, job: Job) -> None:
        worker = get_current_worker()
        stream_job(job, self, self.gauges, lambda: worker.is_cancelled)

    @work(thread=True, group="answer", exclusive=True, exit_on_error=False)
    def _float32_worker(self, backend: Backend) -> None:
        worker = get_current_worker()
        check_float32(backend, self, lambda: worker.is_cancelled)

    def _current(self, job_id: int) -> bool:
        return self.job is not None and self.job.id == job_id and self.answer_view is not None

    def on_round_arrived(self, message: RoundArrived) -> None:
        if not self._current(message.job_id):
            return
        updates = message.updates
        if isinstance(self.job, AnswerJob):  # committed before the rounds can reach the screen
            for update in updates:
                self.recorder.spans(update.spans)
            self.recorder.flush()
        self.gauges.push_rounds([len(u.accepted) + (1 if u.token else 0) for u in updates])
        last = updates[-1]
        if self.pacing.step and last.accepted + last.rejected:
            self.answer_view.tokens.append(_spans(updates[:-1]),
                                           pending=last.accepted + last.rejected)
            self.held_round = last
            return
        self.answer_view.tokens.append(_spans(updates))

    def on_context_notice(self, message: ContextNotice) -> None:
        if not self._current(message.job_id):
            return
        trimmed = message.trimmed
        text = (f"⚠ dropped the {trimmed.dropped_exchanges} oldest exchange(s) from the prompt to "
                f"fit the model's context of {trimmed.context_length} tokens")
        self._mount(Notice(text, "warning"), before=self.answer_view)
        self.notify(text, severity="warning")

    def on_answer_finished(self, message: AnswerFinished) -> None:
        if not self._current(message.job_id):
            return
        done = message.done
        self._release_held()
        status = {"stopped": "stopped", "failed": "error"}.get(done.stop_reason, "done")
        view, job = self.answer_view, self.job
        view.finish(done.stats, status, done.error or None)
        if done.error:
            self.notify(f"answer ended early: {done.error} — the text so far is kept",
                        severity="error", timeout=12)
        stats = done.stats
        self.loading.reach(stats.prompt_tokens + stats.tokens)
        if isinstance(job, RaceJob):
            self._race_result(done)
        else:
            self.recorder.finish(done, status, done.text)
            self.last_answer = view
            if job.speculate:
                self.last_speculative = (done, gauge_speedup(done.stats, self.gauges.calibration))
        self._job_ended()

    def on_answer_failed(self, message: AnswerFailed) -> None:
        if not self._current(message.job_id):
            return
        self._release_held()
        self.answer_view.finish(None, "error", message.error)
        if isinstance(self.job, AnswerJob):
            self.recorder.finish(None, "error", self.answer_view.text)
            self.failed = (self.answer_view, self.job.text)
        self.notify(f"generation failed: {message.error} — the conversation is intact",
                    severity="error", timeout=12)
        self._job_ended()

    def _release_held(self) -> None:
        held = self.held_round
        if held is not None and self.answer_view is not None:
            self.answer_view.tokens.append(held.spans)
        self.held_round = None

    def _job_ended(self) -> None:
        self.job = None
        self.answer_view = None
        self.gauges.status = "ready"
        if self.waiting_backend is not None:
            load_id, backend, info = self.waiting_backend
            self.waiting_backend = None
            self._adopt(load_id, backend, info)
        else:
            self._maybe_calibrate()

    def _mount(self, widget, before=None) -> None:
        self.transcript.mount(widget, before=before)


def _spans(updates) -> tuple:
    return tuple(span for update in updates for span in update.spans)


def create_app(backend_factory: BackendFactory, pairs: list[tuple[str, str]], pair_name: str,
               **options) -> SpecchatApp:
    """The app, ready to `run()` or to drive with `run_test()`."""
    return SpecchatApp(backend_factory, pairs, pair_name, **options)
