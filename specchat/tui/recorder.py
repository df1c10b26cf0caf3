"""Saving the conversation on screen to the history database as it streams.

The TUI hands over each round's spans as it arrives and commits them (`flush`)
before it appends them to the answer on screen, so whatever is on screen is already
committed: one small transaction per round (WAL, synchronous=NORMAL: no disk sync).

History never stops silently. Every save is a step in a queue, run in order: a step
that fails (another chat holds the file past the busy timeout, a full disk) stays at the
head with everything after it, in memory, and the queue is tried again at the next save;
the user is told once when saving fails (what is kept) and once when it works again. A
file SQLite cannot read was already moved aside and a fresh one started by
`open_history`; the user is told that too. It never stops the chat. `saved_spans`,
`saved_stats` and `saved_turns` turn a saved conversation back into what the screen
and the service take.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Callable

from specchat.chat.events import AnswerDone, StatsSnapshot, TokenSpan
from specchat.history.store import HistoryStore, SavedConversation, SavedToken, SavedTurn, open_history
from specchat.turn import Turn

Step = Callable[[HistoryStore], None]


class HistoryRecorder:
    """The current conversation's rows in the history database."""

    def __init__(self, path: Path | None, on_problem: Callable[[str], None]):
        self.path, self.on_problem = path, on_problem
        self.store: HistoryStore | None = None
        self.conversation_id: int | None = None
        self.answer_id: int | None = None
        self.last_user_id: int | None = None
        self.system: str | None = None
        self.pending: list[SavedToken] = []
        self.queue: list[Step] = []
        """Saves not yet on disk, in order (the head failed last time)."""
        self.failing: str | None = None
        """Why saving fails, while it does."""
        self._open()

    # ----- the queue of saves ------------------------------------------------------------

    def _open(self) -> bool:
        try:
            self.store, note = open_history(self.path)
        except (sqlite3.Error, OSError) as error:
            self._failed(error)
            return False
        if note:
            self.on_problem(note)
        return True

    def _failed(self, error: Exception) -> None:
        if self.failing is None:
            self.on_problem(f"history is not being saved ({error}): the conversation is kept in "
                            "memory and saved as soon as the file can be written again")
        self.failing = str(error)

    def _save(self, step: Step | None = None) -> None:
        """Queue a step and run every queued step that can run now."""
        if step is not None:
            self.queue.append(step)
        if self.store is None and not self._open():
            return
        while self.queue:
            try:
                self.queue[0](self.store)
            except (sqlite3.Error, OSError) as error:
                self._failed(error)
                return
            self.queue.pop(0)
        if self.failing is not None:
            self.failing = None
            self.on_problem("history is being saved again: nothing was lost")

    def _read(self, action: Callable[[HistoryStore], object]):
        self._save()
        if self.store is None or self.queue:
            return None
        try:
            return action(self.store)
        except (sqlite3.Error, OSError) as error:
            self._failed(error)
            return None

    @property
    def unsaved(self) -> int:
        """Saves still waiting in memory."""
        return len(self.queue)

    # ----- what the chat hands over --------------------------------------------------------

    def new_chat(self, system: str | None) -> None:
        def forget(_store) -> None:
            self.conversation_id = self.answer_id = self.last_user_id = None
            self.system = system
        self._save(forget)

    def set_system(self, system: str | None) -> None:
        def save(store: HistoryStore) -> None:
            self.system = system
            if self.conversation_id is not None:
                store.set_system(self.conversation_id, system)
        self._save(save)

    def user(self, text: str, pair: str) -> None:
        def save(store: HistoryStore) -> None:
            if self.conversation_id is None:
                title = " ".join(text.split())[:60] or "untitled"
                self.conversation_id = store.new_conversation(title, pair, self.system)
            self.last_user_id = store.add_user_turn(self.conversation_id, text)
        self._save(save)

    def start_answer(self, mode: str, pair: str) -> None:
        def save(store: HistoryStore) -> None:
            self.answer_id = store.start_answer(self.conversation_id, mode, pair)
        self._save(save)

    def spans(self, spans: tuple[TokenSpan, ...]) -> None:
        """Buffer a round's spans; `flush` commits them."""
        self.pending.extend(SavedToken(s.text, s.kind, s.token_id) for s in spans)

    def flush(self) -> None:
        """Commit buffered spans (the app calls this for every round, before showing it)."""
        if self.pending:
            tokens, self.pending = self.pending, []
            self._save(lambda store: store.append_tokens(self.answer_id, tokens))
        elif self.queue:
            self._save()

    def finish(self, done: AnswerDone | None, status: str, text: str) -> None:
        self.flush()
        stats = done.stats.as_dict() if done else None

        def save(store: HistoryStore) -> None:
            store.finish_answer(self.answer_id, text, status, stats)
            self.answer_id = None
        self._save(save)

    def forget_last_exchange(self) -> None:
        """Regenerate: the last user message and its answer leave the history."""
        def save(store: HistoryStore) -> None:
            if self.last_user_id is not None:
                store.delete_turns_from(self.last_user_id)
        self._save(save)

    def list(self) -> list[SavedConversation]:
        return self._read(lambda s: s.list_conversations()) or []

    def load(self, conversation_id: int) -> SavedConversation | None:
        return self._read(lambda s: s.load(conversation_id))

    def reopen(self, conversation: SavedConversation) -> None:
        """Continue a saved conversation: new turns are added to it."""
        users = [turn.id for turn in conversation.turns if turn.role == "user"]

        def switch(_store) -> None:
            self.conversation_id, self.system = conversation.id, conversation.system
            self.answer_id, self.last_user_id = None, users[-1] if users else None
        self._save(switch)

    def delete(self, conversation_id: int) -> None:
        def save(store: HistoryStore) -> None:
            store.delete_conversation(conversation_id)
            if conversation_id == self.conversation_id:
                self.conversation_id = self.answer_id = self.last_user_id = None
        self._save(save)

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
