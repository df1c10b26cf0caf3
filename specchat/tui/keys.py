"""The one key table: every key of the chat, what it does, how the footer, the help
screen and the command palette name it. The chat screen's bindings, the help
screen's table and the palette's action entries are all built from `KEYS`.

Knows nothing about the app's state: an entry names an action by its string, as
Textual's bindings do, and the part of the app that owns it (`owner`): the
conversation (answers, pacing), the settings, the history, or the app itself; the
app's one-line action methods that run each on its owner come from here too
(`owner_actions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from textual.binding import Binding


@dataclass(frozen=True)
class Key:
    """One key (or key group) of the chat screen."""

    keys: str
    """Textual key names, comma-separated ("f8,ctrl+f"); empty for keys bound elsewhere."""
    shown: str
    """How the help screen writes the key ("F8 or Ctrl+F")."""
    help: str
    """The help screen's line: what the key does."""
    action: str = ""
    """The app action it runs ("toggle_step", "change_k(1)"); empty: handled by a widget."""
    label: str = ""
    """The footer's short name."""
    footer: bool = False
    """Shown in the footer."""
    priority: bool = False
    """Wins over the focused widget (the message box would otherwise take the key)."""
    palette: str = ""
    """The palette's title for the action; empty: not in the palette."""
    palette_help: str = ""
    """The palette's help line."""
    owner: str = "conversation"
    """The app attribute whose `action_<name>` runs: conversation, settings, history or app."""

    @property
    def action_name(self) -> str:
        """The action without its arguments ("change_k(1)" -> "change_k")."""
        return self.action.split("(", 1)[0]


KEYS: tuple[Key, ...] = (
    Key("", "Enter", "send the message"),
    Key("", "Ctrl+J (or Shift+Enter where the terminal reports it)", "new line in the message"),
    Key("escape", "Esc", "stop the answer (keeps the partial answer, marked stopped)",
        "stop", "Stop", footer=True),
    Key("", "Ctrl+Q", "quit (also while an answer streams)"),
    Key("ctrl+n", "Ctrl+N", "new chat", "new_chat", "New", priority=True,
        palette="New chat", palette_help="clear the conversation"),
    Key("ctrl+r", "Ctrl+R", "regenerate the last answer", "regenerate", "Regenerate", priority=True,
        palette="Regenerate last answer", palette_help="ask again"),
    Key("ctrl+o", "Ctrl+O", "copy the last answer (never includes rejected drafts)", "copy_answer",
        "Copy", priority=True, palette="Copy last answer", palette_help="without rejected drafts"),
    Key("ctrl+g", "Ctrl+G", "show / hide rejected drafts (ghosts)", "toggle_ghosts", "Ghosts",
        footer=True, priority=True, palette="Toggle ghosts (rejected drafts)",
        palette_help="show or hide"),
    Key("ctrl+t", "Ctrl+T", "last answer: coloured tokens ⇄ rendered Markdown", "toggle_markdown",
        "Markdown", footer=True, priority=True, palette="Toggle Markdown view of last answer",
        palette_help="tokens ⇄ Markdown"),
    Key("ctrl+s", "Ctrl+S", "speculation on / off for the next answer (A/B)", "toggle_speculation",
        "Spec on/off", footer=True, priority=True, palette="Toggle speculation (A/B)",
        palette_help="for the next answer"),
    Key("", "Ctrl+P", "command palette: k, temperature, slow-motion delay, theme, pair, export…"),
    Key("f1", "F1", "this help", "help", "Help", footer=True, owner="app"),
    Key("f2", "F2", "system prompt", "system_prompt", "System", palette="Edit system prompt",
        palette_help="applies from the next answer", owner="settings"),
    Key("f3", "F3", "switch pair (loads in the background)", "pick_pair", "Pair", footer=True,
        owner="settings"),
    Key("f4", "F4", "history: reopen, export, delete past conversations", "history", "History",
        palette="Open history", palette_help="reopen or export past conversations",
        owner="history"),
    Key("f5", "F5", "race: replay the last prompt target-only, compare tokens/s and text", "race",
        "Race", footer=True, palette="Race: replay last prompt target-only",
        palette_help="compare tokens/s and text"),
    Key("ctrl+b", "Ctrl+B", "float32 replay: answer the last prompt greedily in float32, "
        "speculative and target-only; they must be identical", "float32_check", "f32 check",
        priority=True, palette="Float32 replay: check lossless",
        palette_help="speculative and target-only, greedy, float32: must be identical"),
    Key("f6", "F6", "presentation mode (large gauges)", "toggle_presentation", "Present",
        priority=True, palette="Toggle presentation mode", palette_help="large gauges",
        owner="settings"),
    Key("f7", "F7", "step mode: each round pauses with its drafts pending", "toggle_step",
        "Step mode", priority=True, palette="Toggle step mode", palette_help="pause every round"),
    Key("f8,ctrl+f", "F8 or Ctrl+F", "step: resolve the pending round", "step", "Step",
        priority=True),
    Key("f9", "F9", "k − 1 (from the next round)", "change_k(-1)", "k−", owner="settings"),
    Key("f10", "F10", "k + 1 (from the next round)", "change_k(1)", "k+", owner="settings"),
    Key("f11", "F11", "temperature − 0.1 (from the next round)", "change_temperature(-0.1)", "T−",
        owner="settings"),
    Key("f12", "F12", "temperature + 0.1 (from the next round)", "change_temperature(0.1)", "T+",
        owner="settings"),
    Key("ctrl+l", "Ctrl+L", "slow motion on / off (delay set in the palette)", "toggle_slow", "Slow",
        priority=True, palette="Toggle slow motion", palette_help="delay every round"),
)

COLOURS_HELP = """\
Colours: **accepted** draft tokens, **rejected** drafts (dim, struck through),
**resampled** (the target's correction), **bonus** (the target's extra token
after a full accept), **target** (plain decoding), **pending** (step mode).
"""


def bindings(keys: tuple[Key, ...] = KEYS) -> list[Binding]:
    """The chat screen's bindings: every entry with keys, running its app action."""
    return [Binding(key.keys, f"app.{key.action}", key.label, show=key.footer,
                    priority=key.priority) for key in keys if key.keys]


def help_markdown(keys: tuple[Key, ...] = KEYS) -> str:
    """The help screen: a table of every key, then the colours."""
    rows = "\n".join(f"| {key.shown} | {key.help} |" for key in keys)
    return f"# specchat keys\n\n| key | what it does |\n|---|---|\n{rows}\n\n{COLOURS_HELP}"


def palette_actions(keys: tuple[Key, ...] = KEYS) -> list[tuple[str, str, str]]:
    """(title, help, action) for every key action the palette offers too."""
    return [(key.palette, key.palette_help, key.action) for key in keys if key.palette]


def owner_actions(keys: tuple[Key, ...] = KEYS) -> dict[str, Callable]:
    """The app's `action_<name>` methods for the keys its parts own: each runs the owner's
    action of the same name (`app.conversation.action_stop`, ...)."""
    return {f"action_{key.action_name}": _run_on(key.owner, key.action_name)
            for key in keys if key.action and key.owner != "app"}


def _run_on(owner: str, name: str) -> Callable:
    def action(app, *params):
        return getattr(getattr(app, owner), f"action_{name}")(*params)

    action.__doc__ = f"Run `{owner}.action_{name}`."
    return action
