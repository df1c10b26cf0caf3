"""Modal screens: system prompt, pair picker, history browser, a yes/no question, and the
key help.

Each returns its result through `dismiss`; none knows about backends or models. Saved
titles and models.toml's descriptions show their control characters visibly
(specchat/control_chars.py).
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Markdown, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from specchat.control_chars import visible
from specchat.history.store import SavedConversation
from specchat.tui.keys import dialog_bindings, dialog_hint, help_markdown, keymap_of


class HelpScreen(ModalScreen[None]):
    """The keys in effect (a user's keymap applied), as a table."""

    BINDINGS = dialog_bindings("help")

    def __init__(self, keymap: dict[str, str] | None = None):
        super().__init__()
        self.keymap = keymap or {}

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Markdown(help_markdown(keymap=self.keymap))
            yield Static(dialog_hint("help", self.keymap), classes="dialog-hint")


class SystemPromptScreen(ModalScreen[str | None]):
    """Edit the system prompt; Ctrl+S saves, Esc cancels."""

    BINDINGS = dialog_bindings("system prompt")

    def __init__(self, current: str | None):
        super().__init__()
        self.current = current or ""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("System prompt (applies from the next answer) — "
                         + dialog_hint("system prompt", keymap_of(self)))
            yield TextArea(self.current, id="system-text")
            yield Button("Save", id="save", variant="primary")

    def on_button_pressed(self) -> None:
        self.action_save()

    def action_save(self) -> None:
        text = self.query_one("#system-text", TextArea).text.strip()
        self.dismiss(text or None)

    def action_cancel(self) -> None:
        self.dismiss(self.current or None)


class PairPickerScreen(ModalScreen[str | None]):
    """Choose a pair from models.toml."""

    BINDINGS = dialog_bindings("pair picker")

    def __init__(self, pairs: list[tuple[str, str]], current: str | None):
        super().__init__()
        self.pairs = pairs
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Switch pair — it loads in the background; the current one keeps "
                         "working · " + dialog_hint("pair picker", keymap_of(self)))
            options = [Option(Text(visible(f"{'● ' if name == self.current else '  '}{name}  "
                                           f"{about}")), id=name)
                       for name, about in self.pairs]
            yield OptionList(*options, id="pair-list")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


class HistoryScreen(ModalScreen[tuple[str, int] | None]):
    """Past conversations: Enter reopens; m, j, h export; d deletes."""

    BINDINGS = dialog_bindings("history")

    def __init__(self, conversations: list[SavedConversation]):
        super().__init__()
        self.conversations = conversations

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("History — Enter reopens · " + dialog_hint("history", keymap_of(self)))
            options = [Option(Text(visible(f"{when(c.updated)}  {c.title}  [{c.pair}]")),
                              id=str(c.id))
                       for c in self.conversations]
            if not options:
                options = [Option("no saved conversations yet", disabled=True)]
            yield OptionList(*options, id="history-list")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:  # the "none yet" line has none (and is disabled)
            self.dismiss(("open", int(event.option.id)))

    def action_pick(self, what: str) -> None:
        options = self.query_one("#history-list", OptionList)
        if options.highlighted is None:
            return
        option = options.get_option_at_index(options.highlighted)
        if option.id is not None:
            self.dismiss((what, int(option.id)))


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question (deleting a saved conversation in a served chat): y says yes, n or
    Esc no."""

    BINDINGS = dialog_bindings("confirm")

    def __init__(self, question: str):
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(self.question), id="confirm-question")
            yield Static(dialog_hint("confirm", keymap_of(self)), classes="dialog-hint")


def when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))
