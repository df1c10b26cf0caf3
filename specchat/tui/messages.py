"""Messages the worker threads post to the UI: small dataclasses, one line each.

Every message carries the id of the job it belongs to, so that a late message
from a stopped or replaced job can be recognised and dropped. An answer's messages
go to the conversation widget that started it and no further (`bubble=False`).
`StatsUpdated` is posted to the gauges alone and replaces a pending one, so a flood
of rounds collapses to the latest figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from specchat.chat.events import AnswerDone, ContextTrimmed, RoundUpdate, StatsSnapshot
from specchat.chat.baseline import Baseline
from specchat.chat.verdict import IdentityCheck
from specchat.chat.service import ConversationService, PairInfo


@dataclass
class LoadProgress(Message):
    """A line of progress from a pair that is loading."""

    load_id: int
    text: str


@dataclass
class PairLoaded(Message):
    """A pair finished loading and can answer."""

    load_id: int
    service: ConversationService
    info: PairInfo


@dataclass
class LoadFailed(Message):
    """A pair could not be loaded; `error` is a one-line explanation."""

    load_id: int
    pair: str
    error: str


@dataclass
class BaselineMeasured(Message):
    """The target-only baseline of a pair was measured (None: stopped or failed)."""

    load_id: int
    baseline: Baseline | None


@dataclass
class IdentityChecked(Message, bubble=False):
    """The float32 replay ended: its result, or a one-line error."""

    result: IdentityCheck | None
    error: str | None = None


@dataclass
class PromptReading(Message, bubble=False):
    """The model reads `tokens` tokens of the answer's prompt before its first round (`kept`
    more the caches held from the answer before)."""

    job_id: int
    tokens: int
    kept: int = 0


@dataclass
class AnswerNotStarted(Message, bubble=False):
    """The job was stopped while it waited for the model (busy measuring the baseline): the
    model was never asked, and the conversation has no turn of it."""

    job_id: int


@dataclass
class RoundArrived(Message, bubble=False):
    """Verify rounds of an answer, in order: one, or the few that ended within one frame
    (tui/worker.py batches rounds faster than `FRAME_S`)."""

    job_id: int
    updates: tuple[RoundUpdate, ...]


@dataclass
class StatsUpdated(Message):
    """The answer's statistics after a round (coalesces: only the latest matters)."""

    job_id: int
    stats: StatsSnapshot
    at_once: bool = False
    """Drawn at once, not at the gauges' pace (`GAUGE_FRAME_S`): an answer's last figures,
    or a round the user is pacing (step mode, slow motion)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, StatsUpdated)


@dataclass
class ContextNotice(Message, bubble=False):
    """Oldest exchanges were dropped to fit the model's context."""

    job_id: int
    trimmed: ContextTrimmed


@dataclass
class AnswerFinished(Message, bubble=False):
    """The answer is complete or was stopped."""

    job_id: int
    done: AnswerDone


@dataclass
class AnswerFailed(Message, bubble=False):
    """Generation raised; `error` is a one-line explanation."""

    job_id: int
    error: str
