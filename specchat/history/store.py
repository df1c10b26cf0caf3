"""The history database: conversations, their turns, and every token of every
answer with its kind, saved as the answer streams.

SQLite in WAL mode, one commit per batch of spans handed over (the TUI hands
over one verify round at a time), so a crash or `kill -9` loses nothing that
was already on screen. An answer still marked `streaming` when the file is
opened again was interrupted; it reads back as `interrupted`.

Several chats may share one file: every connection waits up to `BUSY_TIMEOUT_S` for
another's write (WAL lets readers go on meanwhile). The schema carries its version in
`PRAGMA user_version` and `MIGRATIONS` brings an older file up to `SCHEMA_VERSION`; a file
that is not a database or is corrupt is moved aside under a timestamped name by
`open_history`, which starts a fresh one and says so. A healthy file that another program
holds locked is never moved: that is an error for the caller, who tries again later. What
cannot be saved at all has a place beside the database (`unsaved_copy_places`, `write_new`). Standard
library only; knows nothing about Textual or the engine.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from specchat import paths

SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY, title TEXT NOT NULL, pair TEXT NOT NULL DEFAULT '',
    system TEXT, created REAL NOT NULL, updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY, conversation_id INTEGER NOT NULL REFERENCES conversations(id)
        ON DELETE CASCADE,
    role TEXT NOT NULL, text TEXT NOT NULL DEFAULT '', status TEXT NOT NULL DEFAULT 'done',
    mode TEXT NOT NULL DEFAULT '', stats TEXT, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS tokens (
    turn_id INTEGER NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL, text TEXT NOT NULL, kind TEXT NOT NULL, token_id INTEGER,
    PRIMARY KEY (turn_id, seq));
"""


SCHEMA_VERSION = 1
"""The schema's version (`PRAGMA user_version`); files from before versioning read 0."""
MIGRATIONS: dict[int, str] = {0: SCHEMA}
"""SQL that brings a file of version N to N + 1 (0: an empty or pre-versioned file, whose
tables are version 1's: `CREATE TABLE IF NOT EXISTS` leaves them as they are)."""
BUSY_TIMEOUT_S = 10.0
"""How long a write waits for another chat's write to the same file."""
SAME_NAME_MAX = 100
"""Copies `write_new` numbers under one name (one a second is the stamp's resolution)."""


CORRUPT_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
"""SQLite's names for a file that is not a database, or a damaged one (extended codes too)."""


class NewerHistory(sqlite3.DatabaseError):
    """The file was written by a newer specchat, whose schema this one does not know."""


class CorruptHistory(sqlite3.DatabaseError):
    """SQLite opened the file, but its integrity check failed."""


def is_corrupt(error: sqlite3.Error) -> bool:
    """Whether an error says the file itself is damaged (not locked, busy or unwritable)."""
    name = getattr(error, "sqlite_errorname", "") or ""
    return isinstance(error, CorruptHistory) or name.startswith(CORRUPT_CODES)


def default_path() -> Path:
    return paths.data_dir() / "history.sqlite3"


def migrate(db: sqlite3.Connection) -> None:
    """Bring the file's schema up to SCHEMA_VERSION, one version at a time."""
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise NewerHistory(f"schema version {version} is newer than this specchat's "
                           f"({SCHEMA_VERSION})")
    while version < SCHEMA_VERSION:
        db.executescript(MIGRATIONS[version])
        version += 1
        db.execute(f"PRAGMA user_version = {version}")
        db.commit()


def stamped(path: Path, what: str, suffix: str = "") -> Path:
    """A file beside `path` named for what it holds and when: history.sqlite3.unreadable-..."""
    return path.with_name(f"{path.name}.{what}-{time.strftime('%Y%m%d-%H%M%S')}{suffix}")


def unsaved_copy_places(path: Path) -> tuple[Path, Path]:
    """Where a conversation the history file could not take is written instead: beside the
    database (its folder made again if it went missing), or, only where that folder cannot
    be written, in the system's temporary folder, named as specchat's."""
    beside = stamped(path, "unsaved", ".md")
    return beside, Path(tempfile.gettempdir()) / f"specchat-{beside.name}"


def write_new(place: Path, text: str) -> Path | None:
    """`text` in a new file at `place`, its folder made if missing; a file already there is
    never replaced (-2, -3, ... before the suffix: two chats quitting in the same second keep
    both copies). Where it was written, or None where it cannot be."""
    try:
        place.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    numbered = (place.with_name(f"{place.stem}-{n}{place.suffix}") for n in range(2, SAME_NAME_MAX))
    for candidate in (place, *numbered):
        try:
            with open(candidate, "x", encoding="utf-8") as file:
                file.write(text)
            return candidate
        except FileExistsError:
            continue
        except OSError:
            return None
    return None


def moved_aside(path: Path) -> Path:
    """Move an unreadable history file (and its WAL files) to a timestamped name."""
    target = stamped(path, "unreadable")
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{path}{suffix}")
        if source.exists():
            source.rename(Path(f"{target}{suffix}"))
    return target


def open_history(path: Path | None = None,
                 timeout: float | None = None) -> tuple[HistoryStore, str | None]:
    """(the store, a note for the user or None): a file that is not a database or is corrupt
    is moved aside and a fresh one started. A locked or busy file, a newer specchat's file,
    or a folder that cannot be written, is an error for the caller to show."""
    path = Path(path) if path else default_path()
    try:
        return HistoryStore(path, timeout), None
    except sqlite3.DatabaseError as error:
        if not (is_corrupt(error) and path.is_file()):
            raise
        aside = moved_aside(path)
        return HistoryStore(path, timeout), (f"history file {path} could not be read ({error}): "
                                             f"moved it to {aside.name} and started a fresh one")


@dataclass(frozen=True)
class SavedToken:
    """One token as stored: text, kind (accepted, rejected, ...) and id."""

    text: str
    kind: str
    token_id: int | None = None


def inserted(cursor: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just added."""
    if cursor.lastrowid is None:
        raise sqlite3.DatabaseError("an INSERT added no row")
    return cursor.lastrowid


def kept_text(tokens: Iterable[SavedToken]) -> str:
    """The text an answer's tokens make: every token but the rejected drafts."""
    return "".join(t.text for t in tokens if t.kind != "rejected")


@dataclass
class SavedTurn:
    """A user message or an answer; `text` never contains rejected drafts."""

    role: str
    text: str
    status: str = "done"
    """done, stopped, context_full (the model's context had no room for more), error, or
    interrupted (the app died while it streamed)."""
    mode: str = ""
    """For answers: "speculative k=4", "speculative k=auto", "target only", ..."""
    stats: dict | None = None
    tokens: list[SavedToken] = field(default_factory=list)
    id: int | None = None


@dataclass
class SavedConversation:
    """A conversation read back from the database."""

    id: int
    title: str
    pair: str
    system: str | None
    created: float
    updated: float
    turns: list[SavedTurn] = field(default_factory=list)


class HistoryStore:
    """Reads and writes the history file; use from one thread."""

    def __init__(self, path: Path | None = None, timeout: float | None = None):
        """`timeout`: how long a statement waits for another program's lock (BUSY_TIMEOUT_S)."""
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S if timeout is None else timeout)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            migrate(self.db)
            check = self.db.execute("PRAGMA quick_check(1)").fetchone()[0]
            if check != "ok":
                raise CorruptHistory(f"integrity check: {check}")
        except sqlite3.DatabaseError:
            self.db.close()
            raise
        self._next_seq: dict[int, int] = {}

    def close(self) -> None:
        self.db.close()

    def new_conversation(self, title: str, pair: str = "", system: str | None = None) -> int:
        now = time.time()
        cursor = self.db.execute(
            "INSERT INTO conversations (title, pair, system, created, updated) VALUES (?,?,?,?,?)",
            (title[:80], pair, system, now, now))
        self.db.commit()
        return inserted(cursor)

    def set_system(self, conversation_id: int, system: str | None) -> None:
        self.db.execute("UPDATE conversations SET system = ? WHERE id = ?", (system, conversation_id))
        self.db.commit()

    def add_user_turn(self, conversation_id: int, text: str) -> int:
        return self._add_turn(conversation_id, "user", text, "done", "")

    def start_answer(self, conversation_id: int, mode: str, pair: str = "") -> int:
        """A new answer row marked `streaming`; spans follow with `append_tokens`."""
        return self._add_turn(conversation_id, "assistant", "", "streaming", mode, pair)

    def _add_turn(self, conversation_id: int, role: str, text: str, status: str, mode: str,
                  pair: str = "") -> int:
        """One transaction: the turn, the conversation's time (and pair, if given)."""
        now = time.time()
        cursor = self.db.execute(
            "INSERT INTO turns (conversation_id, role, text, status, mode, created) "
            "VALUES (?,?,?,?,?,?)", (conversation_id, role, text, status, mode, now))
        self.db.execute("UPDATE conversations SET updated = ?, pair = COALESCE(NULLIF(?, ''), pair) "
                        "WHERE id = ?", (now, pair, conversation_id))
        self.db.commit()
        return inserted(cursor)

    def append_tokens(self, turn_id: int, tokens: Iterable[SavedToken]) -> None:
        """Add tokens to an answer and commit: what was handed over is on disk."""
        seq = self._next_seq.get(turn_id)
        if seq is None:
            row = self.db.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM tokens WHERE turn_id = ?",
                                  (turn_id,)).fetchone()
            seq = int(row[0])
        rows = [(turn_id, seq + n, token.text, token.kind, token.token_id)
                for n, token in enumerate(tokens)]
        self.db.executemany("INSERT INTO tokens VALUES (?,?,?,?,?)", rows)
        self.db.commit()
        self._next_seq[turn_id] = seq + len(rows)  # after the commit: a failed one is tried again

    def finish_answer(self, turn_id: int, text: str, status: str, stats: dict | None) -> None:
        self.db.execute("UPDATE turns SET text = ?, status = ?, stats = ? WHERE id = ?",
                        (text, status, None if stats is None else json.dumps(stats), turn_id))
        self.db.commit()
        self._next_seq.pop(turn_id, None)

    def delete_turns_from(self, turn_id: int) -> None:
        """Forget a turn and every later one in its conversation (regenerate)."""
        row = self.db.execute("SELECT conversation_id FROM turns WHERE id = ?", (turn_id,)).fetchone()
        if row:
            self.db.execute("DELETE FROM turns WHERE conversation_id = ? AND id >= ?", (row[0], turn_id))
            self.db.commit()

    def delete_conversation(self, conversation_id: int) -> None:
        self.db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        self.db.commit()

    def list_conversations(self, limit: int = 200) -> list[SavedConversation]:
        rows = self.db.execute(
            "SELECT id, title, pair, system, created, updated FROM conversations "
            "ORDER BY updated DESC LIMIT ?", (limit,)).fetchall()
        return [SavedConversation(*row) for row in rows]

    def turn_counts(self, conversation_id: int) -> dict[str, int]:
        """How many turns the conversation holds, by role (user, assistant)."""
        return dict(self.db.execute("SELECT role, COUNT(*) FROM turns WHERE conversation_id = ? "
                                    "GROUP BY role", (conversation_id,)).fetchall())

    def load(self, conversation_id: int) -> SavedConversation:
        row = self.db.execute("SELECT id, title, pair, system, created, updated FROM conversations "
                              "WHERE id = ?", (conversation_id,)).fetchone()
        if row is None:
            raise KeyError(conversation_id)
        conversation = SavedConversation(*row)
        turns = self.db.execute("SELECT id, role, text, status, mode, stats FROM turns WHERE "
                                "conversation_id = ? ORDER BY id", (conversation_id,)).fetchall()
        conversation.turns = [self._read_turn(*turn) for turn in turns]
        return conversation

    def _read_turn(self, turn_id, role, text, status, mode, stats) -> SavedTurn:
        tokens = [SavedToken(*row) for row in self.db.execute(
            "SELECT text, kind, token_id FROM tokens WHERE turn_id = ? ORDER BY seq", (turn_id,))]
        if status == "streaming":
            status = "interrupted"
            text = kept_text(tokens)
        return SavedTurn(role, text, status, mode, json.loads(stats) if stats else None, tokens,
                         turn_id)
