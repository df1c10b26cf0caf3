"""The conversation on screen: the transcript and the lifecycle of its answers.

`ChatTranscript` is the transcript widget and the one owner of the answer that
streams: it runs jobs (answer, race, float32 replay) in its own thread workers,
which post to it; it holds the prompt queued until a pair has loaded (answered with the
reason if that load fails; while no pair answers after a failed load, a message is refused
and stays in the input), the round held in step mode, and what regenerate, copy and the
replays need. Its keys are its actions;
the pacing keys are `PacingControls`' (tui/pacing_controls.py) and the race and the
float32 replay are `Replays`' (tui/replays.py). When an answer ends, what lies far above the
view is folded (`PastFold`, tui/past.py), so a long conversation lays out as fast as a short one.
It reaches the pair's service, the recorder and the settings through the app
(`TranscriptHost`) and says when it falls idle (`Idle`). It never loads a pair
and never imports models or torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from textual import work
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.worker import get_current_worker

from specchat.chat.baseline import Baseline
from specchat.chat.events import AnswerDone, RoundUpdate, spans_of
from specchat.chat.service import ConversationService, PairInfo, answer_mode
from specchat.history.store import SavedConversation
from specchat.tui.gauges import Gauges
from specchat.tui.messages import (AnswerFailed, AnswerFinished, AnswerNotStarted, ContextNotice,
                                   IdentityChecked, PromptReading, RoundArrived)
from specchat.tui.past import PastFold
from specchat.tui.recorder import HistoryRecorder, saved_spans, saved_stats, saved_turns
from specchat.tui.transcript import AnswerView, Notice, TokenFlow, UserTurn, answer_status
from specchat.tui.worker import AnswerJob, Job, Pacing, RaceJob, check_float32, stream_job
from specchat.turn import Turn

if TYPE_CHECKING:  # the app's other parts, as the host protocol names them
    from specchat.tui.history_actions import HistoryActions
    from specchat.tui.pair_switch import PairSwitch
    from specchat.tui.settings import Settings

LONG_PROMPT = 256
"""Tokens from which the status says the model is reading the prompt (seconds on a CPU)."""
ANSWERING = "answering…"
READING = f"{ANSWERING} reading the prompt"


class ReplayResults(Protocol):
    """Where the replays' results go (tui/replays.py's `Replays`)."""

    def race_finished(self, done: AnswerDone) -> None: ...
    def announce(self, text: str) -> None: ...


class TranscriptHost(Protocol):
    """What the conversation needs of the app."""

    service: ConversationService | None
    info: PairInfo | None
    pair_name: str
    settings: Settings
    history: HistoryActions
    pair: PairSwitch
    replays: ReplayResults

    def remember(self, **preferences: object) -> None: ...


class ChatTranscript(VerticalScroll):
    """The transcript, and the answers streaming into it."""

    class Idle(Message):
        """No answer streams any more: a waiting pair may take over, a baseline may be measured."""

    def __init__(self, gauges: Gauges, ghosts: bool, slow_motion_ms: int):
        super().__init__(id="transcript")
        self.gauges = gauges
        self.ghosts = ghosts
        self.slow_motion_ms = slow_motion_ms
        """The delay slow motion uses when turned on (a preference)."""
        self.pacing = Pacing()
        self.speculate = True
        self.job: Job | None = None
        self.job_counter = 0
        self.answer_view: AnswerView | None = None
        self.last_answer: AnswerView | None = None
        self.last_speculative: tuple[AnswerDone, Baseline | None] | None = None
        """(AnswerDone, the baseline its gauge used) of the last speculative answer: what a
        race compares."""
        self.held_round: RoundUpdate | None = None
        self.failed: tuple[AnswerView, str] | None = None
        """The last answer if it failed, and its message, so that regenerate retries it."""
        self.queued_prompt: str | None = None
        self.pending_turns: list[Turn] = []
        """The conversation's turns while no pair has loaded (a reopened one)."""
        self.past = PastFold(self, self._pinned)
        """Folds what lies far above the view, so a long conversation lays out as fast as
        a short one (tui/past.py)."""

    def _pinned(self) -> list[Widget]:
        """What the fold never hides: the answer streaming, the last one (Markdown toggles
        it), a failed one (regenerate removes it)."""
        failed = self.failed[0] if self.failed else None
        return [view for view in (self.answer_view, self.last_answer, failed) if view is not None]

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.past.scrolled(new_value)

    def on_resize(self) -> None:
        self.past.resized()

    def action_page_down(self) -> None:
        """PgDn (keys.py): a page down; at the end the transcript follows the answer again
        (Textual's own page down lets go of the end even where it cannot move)."""
        if self.allow_vertical_scroll and self.scroll_y >= self.max_scroll_y:
            self.scroll_end(animate=False)
            return
        super().action_page_down()

    @property
    def host(self) -> TranscriptHost:
        return self.app  # type: ignore[return-value]

    @property
    def recorder(self) -> HistoryRecorder:
        return self.host.history.live_recorder

    @property
    def service(self) -> ConversationService:
        """The pair's service: answers, replays and regenerate start only once it loaded."""
        service = self.host.service
        if service is None:
            raise RuntimeError("no pair has loaded yet")
        return service

    # ----- asking --------------------------------------------------------------------------

    def submit(self, text: str) -> bool:
        """Send a user message; False when it was not taken (an answer streams)."""
        if self.job is not None:
            self.notify("an answer is streaming: Esc stops it", severity="warning")
            return False
        host, refusal = self.host, self.host.pair.refusal()
        if refusal:  # no pair answers: the text stays in the input, nothing is saved
            self.notify(refusal, severity="error", timeout=12)
            return False
        self.mount(UserTurn(text))
        self.recorder.user(text, host.pair_name)
        if host.service is None:
            self.queued_prompt = text
            self.gauges.status = "your message will be answered once the pair has loaded…"
        else:
            self._start_answer(text)
        return True

    def pair_ready(self) -> None:
        """A pair now answers: answer the message sent while it loaded."""
        if self.queued_prompt is not None:
            text, self.queued_prompt = self.queued_prompt, None
            self._start_answer(text)

    def _withdraw_queued(self) -> None:
        if self.queued_prompt is None:
            return
        self.queued_prompt = None
        self.mount(Notice("■ stopped: your message will not be answered", "warning"))
        self.gauges.status = f"loading {self.host.pair_name}…"

    def pair_failed(self, reason: str) -> None:
        """No pair answers and the one picked did not load: a message waiting for it is
        answered with why, as a failed answer (regenerate asks it again once one loads)."""
        if self.host.service is None and self.queued_prompt is not None:
            view = AnswerView(f"{self.host.pair_name} · not loaded", self.ghosts)
            self.mount(view)
            view.call_after_refresh(view.finish, None, "error", reason)
            self.recorder.start_answer("not loaded", self.host.pair_name)
            self.recorder.finish(None, "error", "")
            self.failed, self.queued_prompt = (view, self.queued_prompt), None

    def _start_answer(self, text: str) -> None:
        host = self.host
        self.failed = None
        speculate = self.speculate and bool(host.info and host.info.has_drafter)
        mode = answer_mode(self.service) if speculate else "target only"
        job = AnswerJob(self.next_job_id(), self.service, self.pacing, speculate=speculate,
                        text=text)
        self._start_job(job, f"{host.pair_name} · {mode}")
        self.recorder.start_answer(mode, host.pair_name)

    def next_job_id(self) -> int:
        self.job_counter += 1
        return self.job_counter

    def start_replay(self, job: Job, label: str) -> None:
        """Run a replay of the last prompt (the race) as the answer worker's job."""
        self._start_job(job, label)

    def release_round(self) -> None:
        """Step mode: show the held round resolved and let the next one come."""
        if self.job is None:
            return
        self._release_held()
        self.job.gate.set()

    def _start_job(self, job: Job, label: str) -> None:
        host = self.host
        host.pair.loading.interrupt()  # the question goes first
        self.job = job
        race = isinstance(job, RaceJob)
        self.answer_view = AnswerView(label, self.ghosts)
        self.mount(self.answer_view)
        gauges = self.gauges
        gauges.start_job(job.id)
        gauges.mode = "race" if race else ("speculative" if job.speculate else "target-only")
        gauges.status = "racing target-only…" if race else ANSWERING
        gauges.sampling = self.service.sampling_params()
        gauges.baseline = host.pair.baseline()
        self._answer_worker(job)

    @work(thread=True, group="answer", exclusive=True, exit_on_error=False)
    def _answer_worker(self, job: Job) -> None:
        worker = get_current_worker()
        stream_job(job, self, self.gauges, lambda: worker.is_cancelled)

    @work(thread=True, group="answer", exclusive=True, exit_on_error=False)
    def float32_worker(self, service: ConversationService) -> None:
        worker = get_current_worker()
        check_float32(service, self, lambda: worker.is_cancelled)

    # ----- what the workers post -----------------------------------------------------------

    def _current(self, job_id: int) -> tuple[Job, AnswerView] | None:
        """The streaming job and its view, if `job_id` is that job's (else a late message)."""
        if self.job is None or self.job.id != job_id or self.answer_view is None:
            return None
        return self.job, self.answer_view

    def on_prompt_reading(self, message: PromptReading) -> None:
        if self._current(message.job_id) is not None and message.tokens >= LONG_PROMPT:
            kept = f", {message.kept:,} kept from before" if message.kept else ""
            self.gauges.status = f"{READING} ({message.tokens:,} tokens{kept})"

    def on_round_arrived(self, message: RoundArrived) -> None:
        current = self._current(message.job_id)
        if current is None:
            return
        view = current[1]
        if self.gauges.status.startswith(READING):
            self.gauges.status = ANSWERING
        updates = message.updates
        if isinstance(self.job, AnswerJob):  # committed before the rounds can reach the screen
            for update in updates:
                self.recorder.spans(update.spans)
            self.recorder.flush()
        self.gauges.push_rounds([len(u.accepted) + (1 if u.token else 0) for u in updates])
        last = updates[-1]
        if self.pacing.step and last.accepted + last.rejected:
            view.tokens.append(spans_of(updates[:-1]), pending=last.accepted + last.rejected)
            self.held_round = last
            return
        view.tokens.append(spans_of(updates))

    def on_context_notice(self, message: ContextNotice) -> None:
        if self._current(message.job_id) is None:
            return
        trimmed = message.trimmed
        text = (f"⚠ dropped the {trimmed.dropped_exchanges} oldest exchange(s) from the prompt to "
                f"fit the model's context of {trimmed.context_length} tokens")
        self.mount(Notice(text, "warning"), before=self.answer_view)
        self.notify(text, severity="warning")

    def on_answer_finished(self, message: AnswerFinished) -> None:
        current = self._current(message.job_id)
        if current is None:
            return
        (job, view), done = current, message.done
        self._release_held()
        status = answer_status(done.stop_reason)
        view.finish(done.stats, status, done.error or None)
        if done.error:
            self.notify(f"answer ended early: {done.error} — the text so far is kept",
                        severity="error", timeout=12)
        self.host.pair.loading.reach(done.stats.prompt_tokens + done.stats.tokens)
        if isinstance(job, RaceJob):
            self.host.replays.race_finished(done)
        else:
            self.recorder.finish(done, status, done.text)
            self.last_answer = view
            if job.speculate:
                self.last_speculative = (done, self.gauges.baseline)
        self._job_ended()

    def on_answer_failed(self, message: AnswerFailed) -> None:
        current = self._current(message.job_id)
        if current is None:
            return
        job, view = current
        self._release_held()
        view.finish(None, "error", message.error)
        if isinstance(job, AnswerJob):
            self.recorder.finish(None, "error", view.text)
            self.failed = (view, job.text)
        self.notify(f"generation failed: {message.error} — the conversation is intact",
                    severity="error", timeout=12)
        self._job_ended()

    def on_answer_not_started(self, message: AnswerNotStarted) -> None:
        """Stopped before the model was free: marked stopped, and regenerate asks it again
        (the conversation never had the turn, so there is no exchange to drop)."""
        current = self._current(message.job_id)
        if current is None:
            return
        job, view = current
        self._release_held()
        view.finish(None, "stopped")
        if isinstance(job, AnswerJob):
            self.recorder.finish(None, "stopped", "")
            self.failed = (view, job.text)
        self._job_ended()

    def on_identity_checked(self, message: IdentityChecked) -> None:
        self.gauges.status = "ready"
        if message.result is None:
            self.notify(f"float32 replay did not finish: {message.error}", severity="warning")
            return
        self.host.replays.announce(message.result.describe())

    def _release_held(self) -> None:
        held = self.held_round
        if held is not None and self.answer_view is not None:
            self.answer_view.tokens.append(held.spans)
        self.held_round = None

    def _job_ended(self) -> None:
        self.job = None
        self.answer_view = None
        self.gauges.status = "ready"
        self.post_message(self.Idle())
        self.call_after_refresh(self.past.close)

    # ----- actions: answers ----------------------------------------------------------------

    def action_stop(self) -> None:
        """Stop the streaming answer within one round; the partial answer stays, marked stopped.
        A message sent while the pair loads is withdrawn: it will not be answered."""
        if self.job is None:
            self._withdraw_queued()
            return
        self.workers.cancel_group(self, "answer")
        if self.job is not None:
            self.job.gate.set()

    def action_new_chat(self) -> None:
        if self.job is not None:
            self.notify("stop the answer first (Esc)", severity="warning")
            return
        host = self.host
        self.remove_children()
        self.past.forget()
        self.last_answer = None
        self.pending_turns = []
        self.recorder.new_chat(host.settings.system)
        if host.service is not None:
            host.service.reset(host.settings.system, [])
        self.notify("new chat")

    def action_regenerate(self) -> None:
        if not self.ready_for("regenerate"):
            return
        if self.failed is not None:
            view, text = self.failed
            view.remove()
            self._start_answer(text)
            return
        asked = self.service.drop_last_exchange()
        if asked is None or self.last_answer is None:
            self.notify("nothing to regenerate yet")
            return
        self.last_answer.remove()
        self.last_answer = None
        self.recorder.forget_last_exchange()
        self.recorder.user(asked, self.host.pair_name)
        self._start_answer(asked)

    def action_copy_answer(self) -> None:
        if self.last_answer is None:
            self.notify("no answer to copy yet")
            return
        text = self.last_answer.text
        self.app.copy_to_clipboard(text)
        self.notify(f"copied the last answer ({len(text)} characters, no rejected drafts)")

    def action_toggle_ghosts(self) -> None:
        self.ghosts = not self.ghosts
        self.past.open()  # the heights change
        for flow in self.query(TokenFlow):
            flow.set_ghosts(self.ghosts)
        self.host.remember(ghosts=self.ghosts)
        self.notify(f"rejected drafts {'shown' if self.ghosts else 'hidden'}")

    def action_toggle_markdown(self) -> None:
        view = self.last_answer
        if view is None or not view.finished:
            self.notify("no finished answer to switch yet")
            return
        shown = view.toggle_markdown()
        self.notify("Markdown view" if shown else "coloured-token view")

    def action_toggle_speculation(self) -> None:
        self.speculate = not self.speculate
        self.gauges.speculate = self.speculate
        state = "on" if self.speculate else "off (target only)"
        self.notify(f"speculation {state} from the next answer")

    def asked(self) -> bool:
        service = self.host.service
        return service is not None and any(turn.role == "user" for turn in service.turns())

    def ready_for(self, what: str) -> bool:
        if self.job is not None:
            self.notify(f"cannot {what} while an answer streams (Esc stops it)", severity="warning")
            return False
        if self.host.service is None:
            self.notify(f"cannot {what}: the pair has not loaded yet", severity="warning")
            return False
        return True

    # ----- a saved conversation ------------------------------------------------------------

    def show_saved(self, conversation: SavedConversation) -> bool:
        """Replace the transcript with a saved conversation, colours included; False while
        an answer streams."""
        if self.job is not None:
            self.notify("stop the answer first (Esc)", severity="warning")
            return False
        self.remove_children()
        self.past.forget()
        for turn in conversation.turns:
            if turn.role == "user":
                self.mount(UserTurn(turn.text))
                continue
            view = AnswerView(f"{conversation.pair} · {turn.mode}", self.ghosts, saved_spans(turn))
            self.mount(view)
            view.call_after_refresh(view.finish, saved_stats(turn.stats), turn.status)
            self.last_answer = view
        self.pending_turns = saved_turns(conversation)
        self.call_after_refresh(self.call_after_refresh, self.past.close)  # once finished views are laid out
        return True

