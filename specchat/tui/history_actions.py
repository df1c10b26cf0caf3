"""The history's side of the chat: the recorder of the conversation on screen and
the actions on past conversations (the history screen: reopen, export, delete;
the palette's exports).

`HistoryActions` owns the `HistoryRecorder`; reopening hands the saved turns to the
conversation widget and the pair's service through the app (`HistoryHost`). In a tab of
`specchat serve` (the chat was started `--served`), whoever holds the page drives the chat,
so deleting a saved conversation asks first. It knows no widget but the modal history and
confirmation screens, and never imports models or torch.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Protocol

from textual.notifications import SeverityLevel

from specchat.history.store import SavedConversation, default_path
from specchat.tui.recorder import HistoryRecorder
from specchat.turn import Turn

EXPORT_SUFFIXES = {"markdown": "md", "json": "json", "html": "html"}
RETRY_EVERY_S = 1.0
"""How often saves waiting in memory are tried again (the recorder's pause still applies)."""


class SavedTranscript(Protocol):
    """What reopening a conversation needs of the transcript (tui/answers.py's
    `ChatTranscript`, named by its parts: that module imports this one)."""

    @property
    def pending_turns(self) -> list[Turn]: ...
    def show_saved(self, conversation: SavedConversation) -> bool: ...


class HistoryHost(Protocol):
    """What the history actions need of the app."""

    service: Any
    @property
    def transcript(self) -> SavedTranscript: ...
    settings: Any
    theme_variables: dict[str, str]

    @property
    def current_theme(self) -> Any: ...
    def push_screen(self, screen: Any, callback: Any = None) -> object: ...
    def set_interval(self, interval: float, callback: Any) -> object: ...
    def notify(self, message: str, *, title: str = ..., severity: SeverityLevel = ...,
               timeout: float | None = ..., markup: bool = ...) -> None: ...
    def report_problem(self, text: str) -> None: ...


class HistoryActions:
    """The recorder and what F4 and the palette do with saved conversations."""

    def __init__(self, app: HistoryHost, path: Path | None, confirm_deletes: bool = False):
        self.app, self.path = app, path
        self.confirm_deletes = confirm_deletes
        """Ask before deleting a saved conversation (a served chat)."""
        self.recorder: HistoryRecorder | None = None

    @property
    def live_recorder(self) -> HistoryRecorder:
        """The recorder, once `open` ran (the app opens it when it mounts, before any action)."""
        if self.recorder is None:
            raise RuntimeError("the history is not open yet")
        return self.recorder

    def open(self, system: str | None) -> None:
        """Open the database (once the app runs: a problem stays on screen); while saves wait
        in memory, they are tried again every RETRY_EVERY_S even when the chat is idle."""
        self.recorder = HistoryRecorder(self.path, self.app.report_problem)
        self.recorder.new_chat(system)
        self.app.set_interval(RETRY_EVERY_S, self.retry)

    def retry(self) -> None:
        if self.recorder is not None and self.recorder.unsaved:
            self.recorder.flush()

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()

    def unsaved_note(self) -> str | None:
        """Once closed: where the conversation went that the history file could not take."""
        if self.recorder is None or self.recorder.unsaved_copy is None:
            return None
        copy = self.recorder.unsaved_copy
        folder = (self.path or default_path()).parent
        elsewhere = "" if copy.parent == folder else f" (its folder {folder} cannot be written)"
        return (f"the history file could not be written ({self.recorder.failing}); "
                f"this conversation is in {copy}{elsewhere}")

    def action_history(self) -> None:
        from specchat.tui.screens import HistoryScreen

        self.app.push_screen(HistoryScreen(self.live_recorder.list()), self._choice)

    def _choice(self, choice: tuple[str, int] | None) -> None:
        if not choice:
            return
        what, conversation_id = choice
        if what == "delete":
            self.delete(conversation_id)
        elif what == "open":
            conversation = self.live_recorder.load(conversation_id)
            if conversation is not None:
                self.reopen(conversation)
        else:
            self.export(conversation_id, what)

    def delete(self, conversation_id: int) -> None:
        """Delete a saved conversation; in a served chat only once the user says yes."""
        if not self.confirm_deletes:
            self._delete(conversation_id)
            return
        from specchat.tui.screens import ConfirmScreen

        conversation = self.live_recorder.load(conversation_id)
        if conversation is None:
            return
        question = f"Delete the saved conversation “{conversation.title}”? It cannot be undone."
        self.app.push_screen(ConfirmScreen(question),
                             lambda yes: self._delete(conversation_id) if yes else None)

    def _delete(self, conversation_id: int) -> None:
        self.live_recorder.delete(conversation_id)
        self.app.notify("conversation deleted")

    def reopen(self, conversation: SavedConversation) -> None:
        """Show a saved conversation and continue it (new turns are added to it)."""
        app = self.app
        if not app.transcript.show_saved(conversation):
            return
        app.settings.system = conversation.system
        self.live_recorder.reopen(conversation)
        if app.service is not None:
            app.service.reset(conversation.system, app.transcript.pending_turns)

    # ----- export --------------------------------------------------------------------------

    def export_current(self, fmt: str) -> None:
        conversation_id = self.live_recorder.conversation_id
        if conversation_id is None:
            self.app.notify("nothing to export yet")
            return
        self.export(conversation_id, fmt)

    def export(self, conversation_id: int, fmt: str) -> None:
        conversation = self.live_recorder.load(conversation_id)
        if conversation is None:
            return
        target = export_path(conversation, fmt)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(self._render(conversation, fmt), encoding="utf-8")
        except OSError as error:
            self.app.notify(f"export failed: {error}", severity="error")
            return
        self.app.notify(f"exported to {target}", timeout=10)

    def _render(self, conversation: SavedConversation, fmt: str) -> str:
        from specchat.history import export

        if fmt == "html":
            return export.to_html(conversation, self.export_colours())
        return export.to_json(conversation) if fmt == "json" else export.to_markdown(conversation)

    def export_colours(self) -> dict[str, str]:
        """The theme's token colours, for the HTML export."""
        from specchat.tui.themes import theme_page_colours

        return theme_page_colours(self.app.current_theme)


def export_path(conversation: SavedConversation, fmt: str) -> Path:
    """Where an export goes: the data folder's exports/, named by id and title."""
    from specchat import paths

    slug = re.sub(r"[^a-z0-9]+", "-", conversation.title.lower()).strip("-")[:40] or "chat"
    return paths.data_dir() / "exports" / f"{conversation.id}-{slug}.{EXPORT_SUFFIXES[fmt]}"
