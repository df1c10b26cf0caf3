"""Saving the conversation on screen to the history database as it streams.

The TUI hands over each round's spans as it arrives and commits them (`flush`)
before it appends them to the answer on screen, so whatever is on screen is already
committed: one small transaction per round (WAL, synchronous=NORMAL: no disk sync).

History never stops silently. Every save is a step in a queue, run in order: a step
that fails (another program holds the file locked, a full disk) is rolled back and stays
at the head with everything after it, in memory; the queue is tried again after a pause
that doubles while it keeps failing (`RETRY_FIRST_S` .. `RETRY_MAX_S`), at the next save or
the app's retry timer. The user is told once when saving fails (what is kept) and once when
it works again. Saves run on the UI thread, so a save waits at most `UI_WAIT_S` for a lock,
never the store's own busy timeout: a locked file slows a round by that much once per
retry and never freezes the screen. A file that is not a database was already moved aside
and a fresh one started by `open_history`; the user is told that too. On closing, what is
still unsaved gets one last try, then the conversation held in memory is written beside the
database (`unsaved_copy`; its folder made again if it went missing, a copy already there never
replaced; the temporary folder only where the database's folder cannot be written) for the
caller to name, and logged. It never stops the chat. `saved_spans`,
`saved_stats` and `saved_turns` turn a saved conversation back into what the screen and
the service take.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from specchat.chat.events import AnswerDone, StatsSnapshot, TokenSpan
from specchat.history.store import (HistoryStore, SavedConversation, SavedToken, SavedTurn,
                                    default_path, kept_text, open_history, unsaved_copy_places,
                                    write_new)
from specchat.token_kinds import TOKEN_KINDS, TokenKind
from specchat.turn import Turn

UI_WAIT_S = 0.25
"""How long a save (on the UI thread) waits for another program's lock on the file."""
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 8.0
"""While saving fails, the queue is tried again after RETRY_FIRST_S, doubling up to RETRY_MAX_S."""

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
        self.retry_at, self.pause = 0.0, RETRY_FIRST_S
        self.memory = blank_conversation(None)
        """The conversation on screen as the chat handed it over, saved or not."""
        self.unsaved_copy: Path | None = None
        """Where `close` wrote what the history file could not take, if it had to."""
        self.closed = False
        """After `close`: the store is closed, saves only queue, reads give None."""
        self._open()

    # ----- the queue of saves ------------------------------------------------------------

    def _open(self) -> bool:
        try:
            self.store, note = open_history(self.path, UI_WAIT_S)
        except (sqlite3.Error, OSError) as error:
            self._failed(error)
            return False
        if note:
            self.on_problem(note)
        return True

    def _failed(self, error: Exception) -> None:
        if self.store is not None:
            try:
                self.store.db.rollback()  # the step runs again whole, in a fresh transaction
            except sqlite3.Error:
                pass
        if self.failing is None:
            self.on_problem(f"history is not being saved ({error}): the conversation is kept in "
                            "memory and saved as soon as the file can be written again")
        else:
            self.pause = min(self.pause * 2, RETRY_MAX_S)
        self.failing, self.retry_at = str(error), time.monotonic() + self.pause

    def _save(self, step: Step | None = None, at_once: bool = False) -> None:
        """Queue a step and run every queued step that can run now (while saving fails, not
        before the pause since the last try is over, unless `at_once`)."""
        if step is not None:
            self.queue.append(step)
        if self.closed:
            return  # rounds may still arrive until the forced exit: they stay in memory
        if self.failing is not None and not at_once and time.monotonic() < self.retry_at:
            return
        if self.store is None and not self._open():
            return
        store = self.store
        assert store is not None, "_open sets it"
        while self.queue:
            try:
                self.queue[0](store)
            except (sqlite3.Error, OSError) as error:
                self._failed(error)
                return
            self.queue.pop(0)
        if self.failing is not None:
            self.failing, self.pause = None, RETRY_FIRST_S
            self.on_problem("history is being saved again: nothing was lost")

    def _read(self, action: Callable[[HistoryStore], object]):
        self._save()
        if self.closed or self.store is None or self.queue:
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
        self.memory = blank_conversation(system)

        def forget(_store) -> None:
            self.conversation_id = self.answer_id = self.last_user_id = None
            self.system = system
        self._save(forget)

    def set_system(self, system: str | None) -> None:
        self.memory.system = system

        def save(store: HistoryStore) -> None:
            self.system = system
            if self.conversation_id is not None:
                store.set_system(self.conversation_id, system)
        self._save(save)

    def user(self, text: str, pair: str) -> None:
        title = " ".join(text.split())[:60] or "untitled"
        self.memory.title, self.memory.pair = self.memory.title or title, pair
        self.memory.turns.append(SavedTurn("user", text))

        def save(store: HistoryStore) -> None:
            if self.conversation_id is None:
                self.conversation_id = store.new_conversation(title, pair, self.system)
            self.last_user_id = store.add_user_turn(self.conversation_id, text)
        self._save(save)

    def start_answer(self, mode: str, pair: str) -> None:
        self.memory.turns.append(SavedTurn("assistant", "", "streaming", mode))

        def save(store: HistoryStore) -> None:
            self.answer_id = store.start_answer(row(self.conversation_id), mode, pair)
        self._save(save)

    def spans(self, spans: tuple[TokenSpan, ...]) -> None:
        """Buffer a round's spans; `flush` commits them."""
        tokens = [SavedToken(s.text, s.kind, s.token_id) for s in spans]
        self.pending.extend(tokens)
        answer = self.memory.turns[-1] if self.memory.turns else None
        if answer is not None and answer.role == "assistant":
            answer.tokens.extend(tokens)  # its text is derived from them if ever needed

    def flush(self, at_once: bool = False) -> None:
        """Commit buffered spans (the app calls this for every round, before showing it) and
        whatever waits in the queue; `at_once`: even within the pause after a failed try."""
        if self.pending:
            tokens, self.pending = self.pending, []
            self._save(lambda store: store.append_tokens(row(self.answer_id), tokens), at_once)
        elif self.queue:
            self._save(at_once=at_once)

    def finish(self, done: AnswerDone | None, status: str, text: str) -> None:
        self.flush()
        stats = done.stats.as_dict() if done else None
        if self.memory.turns and self.memory.turns[-1].role == "assistant":
            answer = self.memory.turns[-1]
            answer.text, answer.status, answer.stats = text, status, stats

        def save(store: HistoryStore) -> None:
            store.finish_answer(row(self.answer_id), text, status, stats)
            self.answer_id = None
        self._save(save)

    def forget_last_exchange(self) -> None:
        """Regenerate: the last user message and its answer leave the history."""
        users = [n for n, turn in enumerate(self.memory.turns) if turn.role == "user"]
        del self.memory.turns[users[-1] if users else len(self.memory.turns):]

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
        self.memory = SavedConversation(conversation.id, conversation.title, conversation.pair,
                                        conversation.system, conversation.created,
                                        conversation.updated, list(conversation.turns))

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
        """Save what is queued (one last try, at once); if the file still cannot take it, write
        the conversation in memory beside it (`unsaved_copy`). Once; later calls do nothing,
        and later saves stay in memory (the store is closed)."""
        if self.closed:
            return
        self.flush(at_once=True)
        self.closed = True
        if self.queue:
            self.unsaved_copy = write_unsaved_copy(self.memory, self.path)
        if self.store is not None:
            self.store.close()


def blank_conversation(system: str | None) -> SavedConversation:
    now = time.time()
    return SavedConversation(0, "", "", system, now, now)


def write_unsaved_copy(conversation: SavedConversation, path: Path | None) -> Path | None:
    """The conversation as Markdown beside the history file (in the temporary folder only where
    that folder cannot be written): where its words go when the history file cannot take
    them. None if there were none, or nowhere took them."""
    from specchat.history.export import to_markdown

    conversation = replace(conversation, turns=[streamed_text(turn) for turn in conversation.turns])
    if not any(turn.text for turn in conversation.turns):
        return None
    text = to_markdown(conversation)
    for place in unsaved_copy_places(Path(path) if path else default_path()):
        written = write_new(place, text)
        if written is not None:
            logging.getLogger(__name__).warning("the history file could not take the "
                                                "conversation: it is in %s", written)
            return written
    return None


def row(row_id: int | None) -> int:
    """The id of a row that an earlier step of the queue inserted (steps run in order: the
    user's turn before its answer, the answer before its tokens)."""
    if row_id is None:
        raise RuntimeError("a history step ran before the row it writes into was saved")
    return row_id


def streamed_text(turn: SavedTurn) -> SavedTurn:
    """An answer still streaming gets the text its tokens so far make (only `finish` sets it)."""
    return replace(turn, text=kept_text(turn.tokens)) if turn.status == "streaming" else turn


def saved_spans(turn: SavedTurn) -> list[TokenSpan]:
    """A saved answer's tokens as the spans an answer view draws."""
    return [TokenSpan(t.text, kind_of(t.kind), t.token_id or 0) for t in turn.tokens]


def kind_of(text: str) -> TokenKind:
    """A saved token's kind; one this version does not know (a newer one's) draws as target."""
    return next((kind for kind in TOKEN_KINDS if kind == text), "target")


def saved_stats(data: dict | None) -> StatsSnapshot | None:
    """A saved answer's figures (`StatsSnapshot.as_dict`) back as a snapshot."""
    if not data:
        return None
    fields = StatsSnapshot.__dataclass_fields__
    values: dict[str, Any] = {key: tuple(value) if isinstance(value, list) else value
                              for key, value in data.items() if key in fields}
    return StatsSnapshot(**values)


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
