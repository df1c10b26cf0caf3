"""The real backend: a pair from models.toml loaded with `load_pair`, chatting
through `ChatSession`.

Importing this module is cheap: torch, transformers and the chat session are
imported inside `load`, which runs in a worker thread, so the app opens before
any of them is loaded. Knows nothing about Textual.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Iterator

from specchat.chat.events import AnswerDone, ChatEvent
from specchat.tui.backend import Calibration, PairInfo, Progress, ShouldStop

CALIBRATION_PROMPT = "Write three sentences about the sea."
CALIBRATION_TOKENS = 32


class ChatBackend:
    """A `Backend` over `specchat.chat.session.ChatSession`."""

    def __init__(self, pair_config: Any, system: str | None = None, max_new_tokens: int = 512,
                 dtype: str | None = None, calibration_tokens: int = CALIBRATION_TOKENS):
        self.pair_config = pair_config
        self.name = pair_config.name
        self.busy = threading.Lock()
        self.max_new_tokens = max_new_tokens
        self.dtype = dtype
        self.calibration_tokens = calibration_tokens
        self.session: Any = None
        self._system = system
        self._pending_turns: list[tuple[str, str]] = []

    def load(self, progress: Progress) -> PairInfo:
        progress("importing torch and transformers")
        from specchat.chat.session import ChatSession
        from specchat.models.loader import load_pair

        pair = load_pair(self.pair_config, dtype=self.dtype, progress=progress)
        self.session = ChatSession(pair, system=self._system, seed=0)
        self.reset(self._system, self._pending_turns)
        return PairInfo(self.name, pair.device, pair.dtype, pair.memory_bytes,
                        pair.drafter is not None, self.session.settings.k,
                        self.session.settings.sampling.temperature, pair.context_length,
                        pair.load_s, self.pair_config.description)

    def calibrate(self, should_stop: ShouldStop) -> Calibration | None:
        """Decode a short answer target-only, greedy, on a scratch conversation."""
        from specchat.chat.session import ChatSession

        scratch = ChatSession(self.session.pair, seed=0)
        scratch.speculate = False  # decodes with k = 0 whatever the settings say
        scratch.settings.sampling = dataclasses.replace(scratch.settings.sampling, temperature=0.0)
        done = None
        for event in scratch.answer(CALIBRATION_PROMPT, self.calibration_tokens, should_stop):
            if isinstance(event, AnswerDone):
                done = event
        if done is None or done.stop_reason == "stopped" or not done.stats.tokens_per_s:
            return None
        return Calibration(done.stats.tokens_per_s, done.stats.tokens, time.time())

    def answer(self, text: str, speculate: bool, should_stop: ShouldStop) -> Iterator[ChatEvent]:
        self.session.speculate = speculate
        yield from self.session.answer(text, self.max_new_tokens, should_stop)

    def race(self, should_stop: ShouldStop) -> Iterator[ChatEvent]:
        from specchat.chat.session import ChatSession

        turns = self.session.conversation.turns
        last = max(i for i, turn in enumerate(turns) if turn.role == "user")
        scratch = ChatSession(self.session.pair, self.session.conversation.system, seed=0)
        scratch.settings.sampling = self.session.settings.sampling
        scratch.conversation.turns = list(turns[:last])
        scratch.speculate = False  # target only: k = 0 with the same sampling
        yield from scratch.answer(turns[last].content, self.max_new_tokens, should_stop)

    def set_k(self, k: int) -> None:
        if self.session is not None:
            self.session.settings.k = k

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
