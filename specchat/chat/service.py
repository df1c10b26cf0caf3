"""The conversation service the chat layer offers a user interface: a small
`ConversationService` protocol (answer, race, measure the baseline, float32 replay, reset the
turns, drop the last exchange, and the one owner of k and temperature), the facts a
loaded pair reports (`PairInfo`), and one-line error messages.

The UI only ever talks to a service from its worker threads, and only through this
protocol, so the real one (chat/pair_service.py, over `ChatSession`) and the scripted
one (chat/scripted.py, for tests, the demo and the UI benchmark) are interchangeable. The
CLI builds the real one (it alone knows how to load models) and hands the UI a
factory. No torch, no Textual, no models here.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol

from specchat.chat.baseline import Baseline, SamplingParams
from specchat.chat.events import ChatEvent
from specchat.chat.verdict import IdentityCheck
from specchat.engine.params import FIXED_DRAFT_LENGTH, K_MAX
from specchat.turn import Turn

__all__ = ["ConversationService", "FIXED_DRAFT_LENGTH", "K_MAX", "PairInfo", "Progress",
           "SamplingParams", "ShouldStop", "answer_mode", "describe_error"]
"""The engine's k bound passes through here: the TUI's keys and palette, which may not
import the engine, use the one maximum (engine/params.py)."""

ShouldStop = Callable[[], bool]
Progress = Callable[[str], None]


@dataclass(frozen=True)
class PairInfo:
    """What the gauges show about a loaded pair."""

    name: str
    device: str
    dtype: str
    memory_bytes: int
    """Parameter bytes of target and draft together."""
    has_drafter: bool
    k: int
    temperature: float
    context_length: int
    load_s: float = 0.0
    description: str = ""
    k_auto: bool = False
    """k = "auto": the engine picks k every round (`k` is only its starting value)."""
    seed: int | None = None
    """The sampling seed of the session (drawn from the OS when none was given)."""
    engines: str = ""
    """Which backend computes each model, e.g. "target llama.cpp · draft torch (lean)"."""
    cross_tokenizer: bool = False
    """The draft has a tokenizer of its own: its text is re-tokenized into the target's tokens,
    and a target token the draft's tokens do not line up with is marked (chat/cross/)."""


class ConversationService(Protocol):
    """A pair behind the UI. Every method but the setters and getters runs in a worker
    thread. The service owns the decoding settings: `k` and `temperature` are read from it,
    never kept elsewhere."""

    name: str
    busy: threading.Lock
    """Held while a thread decodes, so two threads never share the model's caches."""

    def load(self, progress: Progress) -> PairInfo: ...
    def measure_baseline(self, should_stop: ShouldStop, needed_context: int = 0) -> Baseline | None:
        """Measure target-only costs at the current sampling settings, covering contexts up
        to `needed_context` (chat/baseline.py); None if stopped first."""
        ...
    def sampling_params(self) -> SamplingParams:
        """The sampling settings of the next answer (a baseline is valid for one)."""
        ...
    def answer(self, text: str, speculate: bool, should_stop: ShouldStop) -> Iterator[ChatEvent]: ...
    def race(self, should_stop: ShouldStop) -> Iterator[ChatEvent]:
        """Replay the last user message target-only, leaving the conversation alone."""
        ...
    def float32_check(self, should_stop: ShouldStop) -> IdentityCheck | None:
        """Replay the last prompt greedily in float32, speculative and target-only."""
        ...
    @property
    def k(self) -> int:
        """The draft length of the next round (the starting value under k = auto)."""
        ...
    @property
    def k_auto(self) -> bool:
        """Whether the engine picks k every round."""
        ...
    @property
    def temperature(self) -> float: ...
    def set_k(self, k: int) -> None:
        """A fixed k from now on (it replaces an adaptive policy)."""
        ...
    def set_temperature(self, temperature: float) -> None: ...
    def reset(self, system: str | None, turns: list[Turn]) -> None:
        """Start over from these turns under this system prompt."""
        ...
    def turns(self) -> list[Turn]: ...
    def drop_last_exchange(self) -> str | None:
        """Forget the last user message and its answer; return the message."""
        ...


def answer_mode(service: ConversationService) -> str:
    """How a speculative answer was asked for, as its label and history say it: the fixed
    k, or "auto" (under k = auto the service's k is only where the next round starts)."""
    return f"speculative k={'auto' if service.k_auto else service.k}"


def describe_error(error: BaseException) -> str:
    """A one-line message for a notification, naming what to do where we can."""
    logging.getLogger(__name__).error("error shown to the user", exc_info=error)
    from specchat.errors import SpecchatError, one_line

    text = one_line(error)
    if "out of memory" in text.lower() or type(error).__name__ == "OutOfMemoryError":
        return ("out of memory: pick a smaller pair (F3), lower the answer length, "
                f"or use a smaller dtype ({one_line(error, 120)})")

    if isinstance(error, SpecchatError):
        return text
    return f"{type(error).__name__}: {text}"
