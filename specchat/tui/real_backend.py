"""The real backend: a pair from models.toml loaded with `load_pair`, chatting
through `ChatSession`.

Importing this module is cheap: torch, transformers and the chat session are
imported inside `load`, which runs in a worker thread, so the app opens before
any of them is loaded. Knows nothing about Textual.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Iterator

from specchat.chat.baseline import Baseline, SamplingKey
from specchat.chat.events import AnswerDone, ChatEvent
from specchat.chat.verdict import IdentityCheck, committed, first_parting
from specchat.tui.backend import PairInfo, Progress, ShouldStop


def last_done(events: Iterator[ChatEvent]) -> AnswerDone | None:
    done = None
    for event in events:
        if isinstance(event, AnswerDone):
            done = event
    return done


class ChatBackend:
    """A `Backend` over `specchat.chat.session.ChatSession`."""

    def __init__(self, pair_config: Any, system: str | None = None, max_new_tokens: int = 512,
                 dtype: str | None = None):
        self.pair_config = pair_config
        self.name = pair_config.name
        self.busy = threading.Lock()
        self.max_new_tokens = max_new_tokens
        self.dtype = dtype
        self.session: Any = None
        self._system = system
        self._pending_turns: list[tuple[str, str]] = []

    def load(self, progress: Progress) -> PairInfo:
        progress("importing torch and transformers")
        from specchat.chat.session import ChatSession
        from specchat.models.loader import load_pair

        pair = load_pair(self.pair_config, dtype=self.dtype, progress=progress)
        self.session = ChatSession(pair, system=self._system)  # seeded from the OS
        self.reset(self._system, self._pending_turns)
        return PairInfo(self.name, pair.device, pair.dtype, pair.memory_bytes,
                        pair.drafter is not None, self.session.settings.k,
                        self.session.settings.sampling.temperature, pair.context_length,
                        pair.load_s, self.pair_config.description,
                        k_auto=self.session.settings.k_policy is not None,
                        seed=getattr(self.session, "seed", None))

    def calibrate(self, should_stop: ShouldStop, needed_context: int = 0) -> Baseline | None:
        """Measure target-only costs at the current sampling settings (chat/calibrate.py)."""
        return self.session.calibrate(should_stop, needed_context)

    def sampling_key(self) -> SamplingKey:
        sampling = self.session.settings.sampling
        return (float(sampling.temperature), int(sampling.top_k), float(sampling.top_p))

    def answer(self, text: str, speculate: bool, should_stop: ShouldStop) -> Iterator[ChatEvent]:
        self.session.speculate = speculate
        yield from self.session.answer(text, self.max_new_tokens, should_stop)

    def race(self, should_stop: ShouldStop) -> Iterator[ChatEvent]:
        yield from self.session.replay_last(self.max_new_tokens, should_stop)

    def float32_check(self, should_stop: ShouldStop) -> IdentityCheck | None:
        """Replay the last prompt greedily in float32, speculative and target-only, on a
        float32 copy of the pair loaded for the purpose (and let go afterwards)."""
        from specchat.chat.session import ChatSession
        from specchat.models.loader import load_pair

        pair = load_pair(self.pair_config, dtype="float32")
        session = ChatSession(pair, self.session.conversation.system, seed=0)
        session.settings.sampling = dataclasses.replace(self.session.settings.sampling,
                                                        temperature=0.0)
        session.conversation.turns = list(self.session.conversation.turns)
        runs = []
        for speculate in (True, False):
            done = last_done(session.replay_last(self.max_new_tokens, should_stop, speculate))
            if done is None or done.stop_reason == "stopped":
                return None
            runs.append(done)
        return IdentityCheck(len(committed(runs[1].spans)), first_parting(*runs))

    def set_k(self, k: int) -> None:
        """A fixed k from now on (it replaces an adaptive policy)."""
        if self.session is not None:
            self.session.settings.k = k
            self.session.settings.k_policy = None

    def set_temperature(self, temperature: float) -> None:
        if self.session is not None:
            sampling = self.session.settings.sampling
            self.session.settings.sampling = dataclasses.replace(sampling, temperature=temperature)

    def reset(self, system: str | None, turns: list[tuple[str, str]]) -> None:
        self._system = system
        self._pending_turns = list(turns)
        if self.session is None:
            return
        from specchat.chat.conversation import Turn

        self.session.conversation.system = system
        self.session.conversation.turns = [Turn(role, text) for role, text in turns]

    def turns(self) -> list[tuple[str, str]]:
        if self.session is None:
            return list(self._pending_turns)
        return [(turn.role, turn.content) for turn in self.session.conversation.turns]

    def drop_last_exchange(self) -> str | None:
        turns = self.turns()
        users = [i for i, (role, _) in enumerate(turns) if role == "user"]
        if not users:
            return None
        self.reset(self._system, turns[:users[-1]])
        return turns[users[-1]][1]
