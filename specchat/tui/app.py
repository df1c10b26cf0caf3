"""The specchat Textual app: it composes the chat screen and holds what is app-wide
(theme, preferences, the pair's conversation service).

The parts own the rest: `ChatTranscript` (tui/answers.py) the transcript and the
answer lifecycle, `Settings` (tui/settings.py) k, temperature, the system prompt and
the pair choice, `HistoryActions` (tui/history_actions.py) the recorder and saved
conversations, `PairSwitch` (tui/pair_switch.py) loads, baselines and which pair
answers. Every key of tui/keys.py runs its owner's action through a one-line app
action. Textual only: torch is never imported here, the service imports it inside
its worker.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from pathlib import Path
from typing import Any

from textual.app import App, SystemCommand

from specchat.errors import UsageError
from specchat.theme_files import DEFAULT_THEME, DEFAULT_TOKEN_COLOURS
from specchat.chat.service import ConversationService, PairInfo
from specchat.tui.answers import ChatTranscript
from specchat.tui.charts import ConversationCharts
from specchat.tui.chat_screen import ChatScreen
from specchat.tui.commands import SpecchatCommands
from specchat.tui.hangup import HangupWatch
from specchat.tui.history_actions import HistoryActions
from specchat.tui.keymap import load_keymap
from specchat.tui.keys import owner_actions
from specchat.tui.messages import BaselineMeasured, LoadFailed, LoadProgress, PairLoaded
from specchat.tui.pair_loading import ServiceFactory
from specchat.tui.pacing_controls import PacingControls
from specchat.tui.pair_switch import PairSwitch
from specchat.tui.replays import Replays
from specchat.tui.settings import Settings
from specchat.tui.themes import load_preferences, load_textual_themes, save_preferences
from specchat.tui.transcript import TokenText
from specchat.tui.worker_threads import WorkerThreads

GC_THRESHOLDS = (20_000, 50, 1_000)
"""Rarer collections: a full one over Textual's objects stalls the screen for a tenth of a
second on a busy CPU, long enough to see while thousands of tokens a second stream in."""


def drawn_on_a_terminal() -> bool:
    """Whether both stdout (whose terminal gives Textual the size) and stderr (where it
    draws) are terminals."""
    return all(stream is not None and stream.isatty() for stream in (sys.__stdout__,
                                                                     sys.__stderr__))


class SpecchatApp(App):
    """Chat with a draft/target pair and watch every token's fate."""

    CSS_PATH = Path(__file__).parent / "app.tcss"
    TITLE = "specchat"
    COMMANDS = App.COMMANDS | {SpecchatCommands}
    TRANSCRIPT = ChatTranscript

    def __init__(self, service_factory: ServiceFactory, pairs: list[tuple[str, str]],
                 pair_name: str, theme: str | None = None, k: int | None = None,
                 temperature: float | None = None, system: str | None = None,
                 history_path: Path | None = None, preferences_path: Path | None = None,
                 served: bool = False):
        super().__init__()
        self.pairs, self.pair_name, self.requested_theme = pairs, pair_name, theme
        self.preferences_path = preferences_path
        self.preferences = load_preferences(preferences_path)
        self.spec_themes, theme_problems = load_textual_themes()
        self.problems: list[str] = [str(problem) for problem in theme_problems]
        """What went wrong that the user must fix (a theme file, the history database):
        shown on the chat screen until the app closes, never as a toast that fades."""
        self.load_failure: str | None = None
        """Why the pair picked last did not load: shown with the problems until another is picked."""
        self.skipped_themes = {problem.name for problem in theme_problems if problem.skipped}
        self.user_keymap: dict[str, str] = {}
        """The keymap.toml entries in effect (binding id -> keys)."""
        self.service: ConversationService | None = None
        self.info: PairInfo | None = None
        self.pair = PairSwitch.over(self, service_factory)
        self.settings = Settings(self, k, temperature, system)
        self.served = served
        self.history = HistoryActions(self, history_path, confirm_deletes=served)
        self.chat_screen = ChatScreen(self.TRANSCRIPT, self.preferences)
        self.transcript, self.gauges = self.chat_screen.transcript, self.chat_screen.gauges
        self.pacing = PacingControls(self.transcript)
        self.replays = Replays(self.transcript)
        self.charts = ConversationCharts(self.transcript)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """The chat on this terminal; with its output piped or redirected, one line instead
        (Textual draws on stderr at the size stdout's terminal reports, and would draw at a
        guessed 80x24 into the pipe). A served tab draws through textual-serve, and a
        headless run (snapshots, scripts) draws nowhere: both run."""
        if not (self.served or kwargs.get("headless")) and not drawn_on_a_terminal():
            raise UsageError("the chat draws on a terminal, and its output goes to a pipe or "
                             "a file here: run it without redirecting its output, or use "
                             "`specchat run PROMPT` for plain text")
        return super().run(*args, **kwargs)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(DEFAULT_TOKEN_COLOURS)

    def get_default_screen(self) -> ChatScreen:
        return self.chat_screen

    def on_mount(self) -> None:
        asyncio.get_running_loop().set_default_executor(WorkerThreads("specchat-worker"))
        for theme in self.spec_themes.values():
            self.register_theme(theme)
        self.set_theme(self.requested_theme or self.preferences.theme, remember=False)
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self.history.open(self.settings.system)
        self.user_keymap, keymap_problems = load_keymap()
        self.set_keymap(self.user_keymap)
        for problem in keymap_problems:
            self.report_problem(problem)
        self._show_problems()
        HangupWatch(self).start()

    def on_ready(self) -> None:
        """The screen is up and takes typing; now start loading the pair in the background."""
        gc.freeze()  # startup's objects leave the collector's view: shorter full collections
        gc.set_threshold(*GC_THRESHOLDS)
        self.pair.start(self.pair_name)

    def on_unmount(self) -> None:
        self.history.close()

    def get_system_commands(self, screen) -> list[SystemCommand]:
        """Textual's own commands, less its theme picker (ours lists every theme, Textual's
        own among them, with their token colours)."""
        return [c for c in super().get_system_commands(screen) if "theme" not in c.title.lower()]

    def action_help(self) -> None:
        from specchat.tui.screens import HelpScreen

        self.push_screen(HelpScreen(self.user_keymap))

    # ----- theme and preferences -----------------------------------------------------------

    def set_theme(self, name: str, remember: bool = True) -> None:
        if name not in self.spec_themes:
            why = "its file was skipped" if name in self.skipped_themes else "no such theme"
            self.report_problem(f"theme '{name}': {why}; using {DEFAULT_THEME}")
            name = DEFAULT_THEME if DEFAULT_THEME in self.spec_themes else next(iter(self.spec_themes))
        self.theme = name
        if remember:
            self.remember(theme=name)

    def report_problem(self, text: str) -> None:
        """A problem the user must see until the app closes (the chat screen's problem lines)."""
        if text not in self.problems:
            self.problems.append(text)
            logging.getLogger(__name__).warning("problem on screen: %s", text)
        self._show_problems()

    def show_load_failure(self, text: str | None) -> None:
        """A pair that did not load (None: another pair was picked), on the problem lines."""
        self.load_failure = text
        self._show_problems()

    def _show_problems(self) -> None:
        if self.chat_screen.is_mounted:
            failed = [self.load_failure] if self.load_failure else []
            self.chat_screen.problems.show(self.problems + failed)

    def _theme_changed(self, theme) -> None:
        for widget in self.query(TokenText):
            widget.restyle()
        for legend in self.query("#legend"):
            legend.refresh()

    def remember(self, **preferences) -> None:
        """Change preferences and save them."""
        for name, value in preferences.items():
            setattr(self.preferences, name, value)
        save_preferences(self.preferences, self.preferences_path)

    # ----- the pair: its workers post to the app, `PairSwitch` decides ------------------

    def on_load_progress(self, message: LoadProgress) -> None:
        self.pair.progress(message)

    def on_load_failed(self, message: LoadFailed) -> None:
        self.pair.failed(message)

    def on_pair_loaded(self, message: PairLoaded) -> None:
        self.pair.loaded(message)

    def on_baseline_measured(self, message: BaselineMeasured) -> None:
        self.pair.baseline_measured(message)

    def on_chat_transcript_idle(self) -> None:
        self.pair.idle()


for _name, _action in owner_actions().items():  # each key's action, run on its owner
    setattr(SpecchatApp, _name, _action)


def create_app(service_factory: ServiceFactory, pairs: list[tuple[str, str]], pair_name: str,
               **options) -> SpecchatApp:
    """The app, ready to `run()` or to drive with `run_test()`."""
    return SpecchatApp(service_factory, pairs, pair_name, **options)
