"""Saving the conversation on screen to the history database as it streams.

The TUI hands over each round's spans as it arrives and commits them (`flush`)
before it appends them to the answer on screen, so whatever is on screen is already
committed: one small transaction per round (WAL, synchronous=NORMAL: no disk sync). A database problem is
reported once and disables saving; it never stops the chat. `saved_spans`,
`saved_stats` and `saved_turns` turn a saved conversation back into what the screen
and the service take.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from specchat.chat.events import AnswerDone, StatsSnapshot, TokenSpan
from specchat.history.store import HistoryStore, SavedConversation, SavedToken, SavedTurn
from specchat.turn import Turn


class HistoryRecorder:
    """The current conversation's rows in the history database."""

    def __init__(self, path: Path | None, on_error: Callable[[str], None]):
        self.on_error = on_error
        self.store: HistoryStore | None = None
        self.conversation_id: int | None = None
        self.answer_id: int | None = None
        self.last_user_id: int | None = None
        self.system: str | None = None
        self.pending: list[SavedToken] = []
        try:
            self.store = HistoryStore(path)
        except Exception as error:
            self._fail(error)

    def _fail(self, error: Exception) -> None:
        self.store = None
        self.on_error(f"history is not being saved: {error}")

    def _guard(self, action: Callable[[HistoryStore], object]):
        if self.store is None:
            return None
        try:
            return action(self.store)
        except Exception as error:
            self._fail(error)
            return None

    def new_chat(self, system: str | None) -> None:
        self.conversation_id = self.answer_id = self.last_user_id = None
        self.system = system

    def set_system(self, system: str | None) -> None:
        self.system = system
        if self.conversation_id is not None:
            self._guard(lambda s: s.set_system(self.conversation_id, system))

    def user(self, text: str, pair: str) -> None:
        if self.conversation_id is None:
            title = " ".join(text.split())[:60] or "untitled"
            self.conversation_id = self._guard(lambda s: s.new_conversation(title, pair, self.system))
        if self.conversation_id is not None:
            self.last_user_id = self._guard(lambda s: s.add_user_turn(self.conversation_id, text))

    def start_answer(self, mode: str, pair: str) -> None:
        self.answer_id = None
        if self.conversation_id is not None:
            self.answer_id = self._guard(lambda s: s.start_answer(self.conversation_id, mode, pair))

    def spans(self, spans: tuple[TokenSpan, ...]) -> None:
        """Buffer a round's spans; `flush` commits them."""
        if self.answer_id is not None:
            self.pending.extend(SavedToken(s.text, s.kind, s.token_id) for s in spans)

    def flush(self) -> None:
        """Commit buffered spans (the app calls this for every round, before showing it)."""
        if self.pending and self.answer_id is not None:
            tokens, self.pending = self.pending, []
            self._guard(lambda s: s.append_tokens(self.answer_id, tokens))

    def finish(self, done: AnswerDone | None, status: str, text: str) -> None:
        self.flush()
        if self.answer_id is not None:
            stats = done.stats.as_dict() if done else None
            self._guard(lambda s: s.finish_answer(self.answer_id, text, status, stats))
        self.answer_id = None

    def forget_last_exchange(self) -> None:
        """Regenerate: the last user message and its answer leave the history."""
        if self.last_user_id is not None:
            self._guard(lambda s: s.delete_turns_from(self.last_user_id))

    def list(self) -> list[SavedConversation]:
        return self._guard(lambda s: s.list_conversations()) or []

    def load(self, conversation_id: int) -> SavedConversation | None:
        return self._guard(lambda s: s.load(conversation_id))

    def reopen(self, conversation: SavedConversation) -> None:
        """Continue a saved conversation: new turns are added to it."""
        self.conversation_id = conversation.id
        self.system = conversation.system
        self.answer_id = None
        users = [turn.id for turn in conversation.turns if turn.role == "user"]
        self.last_user_id = users[-1] if users else None

    def delete(self, conversation_id: int) -> None:
        self._guard(lambda s: s.delete_conversation(conversation_id))
        if conversation_id == self.conversation_id:
            self.new_chat(self.system)

    def close(self) -> None:
        self.flush()
        if self.store is not None:
            self.store.close()


def saved_spans(turn: SavedTurn) -> list[TokenSpan]:
    """A saved answer's tokens as the spans an answer view draws."""
    return [TokenSpan(t.text, t.kind, t.token_id or 0) for t in turn.tokens]


def saved_stats(data: dict | None) -> StatsSnapshot | None:
    """A saved answer's figures (`StatsSnapshot.as_dict`) back as a snapshot."""
    if not data:
        return None
    fields = StatsSnapshot.__dataclass_fields__
    return StatsSnapshot(**{key: tuple(value) if isinstance(value, list) else value
                            for key, value in data.items() if key in fields})


def saved_turns(conversation: SavedConversation) -> list[Turn]:
    """The turns to continue from: failed answers and the messages they answered are left out."""
    turns: list[Turn] = []
    for turn in conversation.turns:
        if turn.role == "assistant" and turn.status == "error":
            if turns and turns[-1].role == "user":
                turns.pop()
            continue
        turns.append(Turn(turn.role, turn.text))
    return turns
