"""The real conversation service: a loaded pair chatting through `ChatSession`.

The service does not know how models load: the CLI (the composition root) hands it
a `PairLoader`, a function from a dtype (None: the pair's own) and a progress
callback to a loaded pair (chat/pair.py's `Pair`). Importing this module is cheap:
the chat session (and with it torch) is imported inside `load`, which runs in a
worker thread, so the app opens before torch is loaded. Knows nothing about Textual.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Callable, Iterator

from specchat.chat.baseline import Baseline, SamplingParams
from specchat.chat.events import AnswerDone, ChatEvent
from specchat.chat.pair import Pair
from specchat.chat.service import PairInfo, Progress, ShouldStop
from specchat.chat.verdict import IdentityCheck, committed, first_parting
from specchat.turn import Turn

if TYPE_CHECKING:
    from specchat.chat.session import ChatSession

PairLoader = Callable[[str | None, Progress], Pair]
"""(dtype or None for the pair's own, progress) -> the loaded pair."""


def last_done(events: Iterator[ChatEvent]) -> AnswerDone | None:
    done = None
    for event in events:
        if isinstance(event, AnswerDone):
            done = event
    return done


class PairService:
    """A `ConversationService` over `specchat.chat.session.ChatSession`."""

    def __init__(self, name: str, loader: PairLoader, system: str | None = None,
                 max_new_tokens: int = 512, description: str = ""):
        self.name = name
        self.loader = loader
        self.description = description
        self.busy = threading.Lock()
        self.max_new_tokens = max_new_tokens
        self.session: ChatSession | None = None
        self._system = system
        self._pending_turns: list[Turn] = []

    def load(self, progress: Progress) -> PairInfo:
        progress("importing torch")
        from specchat.chat.session import ChatSession

        pair = self.loader(None, progress)
        session = self.session = ChatSession(pair, system=self._system)  # seeded from the OS
        self.reset(self._system, self._pending_turns)
        if self.k_auto and pair.has_draft:  # now, while loading, so no first answer waits for it
            session.start_auto(progress)
        return PairInfo(self.name, pair.device_label, pair.dtype, pair.memory_bytes, pair.has_draft,
                        self.k, self.temperature, pair.context_length, pair.load_s,
                        self.description, k_auto=self.k_auto, seed=session.seed,
                        engines=engines_text(getattr(pair, "backends", None) or {}),
                        cross_tokenizer=getattr(pair, "draft_tokenizer", None) is not None)

    def measure_baseline(self, should_stop: ShouldStop, needed_context: int = 0) -> Baseline | None:
        """Measure target-only costs at the current sampling settings (chat/baseline_timing.py)."""
        return self.loaded.measure_baseline(should_stop, needed_context)

    @property
    def loaded(self) -> ChatSession:
        """The loaded pair's session: the UI asks for an answer, a race or a baseline only
        after `load` (a `PairLoaded` message)."""
        if self.session is None:
            raise RuntimeError(f"pair {self.name} is not loaded yet")
        return self.session

    def sampling_params(self) -> SamplingParams:
        if self.session is None:
            return SamplingParams(self.temperature)
        return self.session.settings.sampling

    def answer(self, text: str, speculate: bool, should_stop: ShouldStop) -> Iterator[ChatEvent]:
        self.loaded.speculate = speculate
        yield from self.loaded.answer(text, self.max_new_tokens, should_stop)

    def race(self, should_stop: ShouldStop) -> Iterator[ChatEvent]:
        yield from self.loaded.replay_last(self.max_new_tokens, should_stop)

    def float32_check(self, should_stop: ShouldStop) -> IdentityCheck | None:
        """Replay the last prompt greedily in float32, speculative and target-only, on a
        float32 copy of the pair loaded for the purpose (and let go afterwards)."""
        from specchat.chat.session import ChatSession

        live = self.loaded
        session = ChatSession(self.loader("float32", lambda _: None), live.conversation.system,
                              seed=0)
        session.settings.sampling = dataclasses.replace(live.settings.sampling, temperature=0.0)
        session.conversation.turns = list(live.conversation.turns)
        runs = []
        for speculate in (True, False):
            done = last_done(session.replay_last(self.max_new_tokens, should_stop, speculate))
            if done is None or done.stop_reason == "stopped":
                return None
            runs.append(done)
        return IdentityCheck(len(committed(runs[1].spans)), first_parting(*runs))

    # ----- the decoding settings: the session's are the only copy ---------------------------

    @property
    def k(self) -> int:
        return self.session.settings.k if self.session is not None else 0

    @property
    def k_auto(self) -> bool:
        return self.session is not None and self.session.settings.k_policy is not None

    @property
    def temperature(self) -> float:
        return self.session.settings.sampling.temperature if self.session is not None else 0.0

    def set_k(self, k: int) -> None:
        """A fixed k from now on (it replaces an adaptive policy)."""
        if self.session is not None:
            self.session.settings.k = k
            self.session.settings.k_policy = None

    def set_temperature(self, temperature: float) -> None:
        if self.session is not None:
            sampling = self.session.settings.sampling
            self.session.settings.sampling = dataclasses.replace(sampling, temperature=temperature)

    # ----- the conversation -----------------------------------------------------------------

    def reset(self, system: str | None, turns: list[Turn]) -> None:
        self._system = system
        self._pending_turns = [Turn(*turn) for turn in turns]
        if self.session is None:
            return
        self.session.conversation.system = system
        self.session.conversation.turns = list(self._pending_turns)

    def turns(self) -> list[Turn]:
        if self.session is None:
            return list(self._pending_turns)
        return list(self.session.conversation.turns)

    def drop_last_exchange(self) -> str | None:
        turns = self.turns()
        users = [i for i, turn in enumerate(turns) if turn.role == "user"]
        if not users:
            return None
        self.reset(self._system, turns[:users[-1]])
        return turns[users[-1]].text


def engines_text(backends: dict[str, str]) -> str:
    """What computes each model, for the panel: "target llama.cpp (...) · draft torch (lean)"."""
    return " · ".join(f"{role} {label}" for role, label in backends.items())
