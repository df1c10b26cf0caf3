"""The main screen: the conversation (transcript) and gauges side by side, the
legend, the message input and the footer; it hands its parts to the app as
attributes (no queries) and passes what the message box sends to the conversation.
Its bindings call the app's actions, so they are off while a modal screen (help,
history, pair picker) is on top.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.app import ComposeResult
from textual.content import Content
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.style import Style
from textual.widgets import Footer, Static, TextArea

from specchat.control_chars import visible
from specchat.token_kinds import TOKEN_KINDS
from specchat.tui.answers import ChatTranscript
from specchat.tui.gauges import Gauges
from specchat.tui.keys import bindings
from specchat.tui.themes import Preferences
from specchat.tui.transcript import KIND_LABELS, UNALIGNED_LABEL, UNALIGNED_MARK, token_styles
from specchat.tui.worker import Pacing


class ChatInput(TextArea):
    """The message box: Enter sends, Ctrl+J (or Shift+Enter) inserts a new line."""

    @dataclass
    class Submitted(Message):
        """The user sent a message."""

        text: str

    @dataclass
    class StopRequested(Message):
        """Esc was pressed in the message box."""

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.post_message(self.Submitted(self.text))
            return
        if event.key in ("ctrl+j", "shift+enter", "alt+enter"):
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        if event.key == "escape":
            event.stop()
            event.prevent_default()
            self.post_message(self.StopRequested())
            return
        await super()._on_key(event)


class Legend(Static):
    """One line naming each token colour, in that colour ("pending" too in step mode), and
    the mark of a cross-tokenizer draft's unaligned tokens where the pair has one."""

    def __init__(self, pacing: Pacing, **kwargs):
        super().__init__(**kwargs)
        self.pacing = pacing

    def render(self) -> Content:
        styles = token_styles(self.app.theme_variables)
        parts: list = []
        kinds = TOKEN_KINDS + (("pending",) if self.pacing.step else ())
        for kind in kinds:
            parts += [(" ■ ", Style(foreground=styles[kind].foreground)), (KIND_LABELS[kind], styles[kind])]
        if getattr(getattr(self.app, "info", None), "cross_tokenizer", False):
            marked = styles["target"] + UNALIGNED_MARK
            parts += [("  ", styles["target"]), (UNALIGNED_LABEL, marked)]
        return Content.assemble(*parts)


class Problems(Static):
    """What the user must fix (a broken theme file, a history database moved aside), one line
    each, in the error colour; hidden while there is none. It stays: a toast would fade."""

    def __init__(self, **kwargs):
        super().__init__(markup=False, **kwargs)
        self.display = False

    def show(self, problems: list[str]) -> None:
        self.update(visible("\n".join(f"⚠ {problem}" for problem in problems)))
        self.display = bool(problems)


class ChatScreen(Screen):
    """Problems, conversation, gauges, legend, input."""

    BINDINGS = bindings()
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    """Below 100 columns the gauges (44 wide) would leave the conversation a strip: they go
    under it instead (app.tcss, `-narrow`)."""

    def __init__(self, transcript: type[ChatTranscript], preferences: Preferences) -> None:
        super().__init__()
        self.gauges = Gauges(id="gauges")
        self.problems = Problems(id="problems")
        self.transcript = transcript(self.gauges, preferences.ghosts,
                                         preferences.slow_motion_ms)
        """The transcript, where user turns, answers and notices are mounted."""
        self.message_box = ChatInput(id="input", soft_wrap=True, show_line_numbers=False,
                                     compact=True,
                                     placeholder="Message (Enter sends, Ctrl+J new line, F1 keys)")

    def compose(self) -> ComposeResult:
        yield self.problems
        with Horizontal(id="main"):
            yield self.transcript
            yield self.gauges
        yield Legend(self.transcript.pacing, id="legend")
        yield self.message_box
        yield Footer()

    def on_mount(self) -> None:
        self.transcript.anchor()
        self.message_box.cursor_blink = not self.app.is_headless  # steady screenshots in tests
        self.message_box.focus()

    def on_chat_input_submitted(self, message: ChatInput.Submitted) -> None:
        text = message.text.strip()
        if text and self.transcript.submit(text):
            self.message_box.clear()

    def on_chat_input_stop_requested(self) -> None:
        self.transcript.action_stop()
