"""The one key table: every key of the chat, what it does, how the footer, the help
screen, the command palette and the docs name it. The chat screen's bindings, the help
screen's table, the palette's action entries and the key tables of README.md and
docs/tui.md (between `<!-- keys:start -->` and `<!-- keys:end -->`, checked by a test;
`python -m specchat.tui.keys` rewrites them) are all built from `KEYS`.

Every binding has an id (`Key.id`; the dialogs' keys, `DIALOG_KEYS`, too), so a user's
keymap (tui/keymap.py) can move it to other keys; the help screen shows the keys in
effect, and every dialog's hint the keys of the app's keymap (`keymap_of`). F1 and F3, which have no second key, are in the palette too (Ctrl+P), like every
other F-key action. The default keys avoid the ones
desktops take, or have a second binding: F9-F12 (k and temperature; GNOME takes F10 and
F11, macOS laptops use them as media keys) also answer to Alt+Down/Up and Alt+Left/Right.

Knows nothing about the app's state: an entry names an action by its string, as
Textual's bindings do, and the part of the app that owns it (`owner`): the
transcript (answers), the pacing, the replays, the settings, the history, or the app itself; the
app's one-line action methods that run each on its owner come from here too
(`owner_actions`).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from textual.binding import Binding, BindingType

if TYPE_CHECKING:
    from textual.screen import Screen

TABLE_START, TABLE_END = "<!-- keys:start -->", "<!-- keys:end -->"


@dataclass(frozen=True)
class Key:
    """One key (or key group) of the chat screen."""

    keys: str
    """Textual key names, comma-separated ("f8,ctrl+f"); empty for keys bound elsewhere."""
    shown: str
    """How the help screen writes a key bound elsewhere ("Enter"); empty: from `keys`."""
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
    owner: str = "transcript"
    """The app attribute whose `action_<name>` runs: transcript, pacing, replays, settings,
    history, charts or app."""
    id: str = ""
    """The binding's id, which a keymap names to move it (empty for keys bound elsewhere)."""

    @property
    def action_name(self) -> str:
        """The action without its arguments ("change_k(1)" -> "change_k")."""
        return self.action.split("(", 1)[0]


KEYS: tuple[Key, ...] = (
    Key("", "Enter", "send the message"),
    Key("", "Ctrl+J (or Shift+Enter / Alt+Enter where the terminal reports them)",
        "new line in the message"),
    Key("escape", "", "stop the answer within one round; the partial answer stays, marked "
        "*stopped* (a message sent while the pair loads is withdrawn)", "stop", "Stop", footer=True, id="stop"),
    Key("", "Ctrl+Q", "quit (also while an answer streams: exits within a second)"),
    Key("pageup", "", "scroll the conversation up a page (the message keeps the focus; the mouse "
        "wheel scrolls it too)", "page_up", priority=True, id="conversation-page-up"),
    Key("pagedown", "", "scroll the conversation down a page (at its end it follows the answer "
        "again)", "page_down", priority=True, id="conversation-page-down"),
    Key("ctrl+n", "", "new chat (keeps the system prompt)", "new_chat", "New", priority=True,
        palette="New chat", palette_help="clear the conversation", id="new-chat"),
    Key("ctrl+r", "", "regenerate the last answer (or retry a failed one)", "regenerate",
        "Regenerate", priority=True, palette="Regenerate last answer", palette_help="ask again",
        id="regenerate"),
    Key("ctrl+o", "", "copy the last answer to the clipboard (OSC 52; never includes rejected "
        "drafts)", "copy_answer", "Copy", priority=True, palette="Copy last answer",
        palette_help="without rejected drafts", id="copy-answer"),
    Key("ctrl+g", "", "show / hide rejected drafts (ghosts), remembered", "toggle_ghosts",
        "Ghosts", footer=True, priority=True, palette="Toggle ghosts (rejected drafts)",
        palette_help="show or hide", id="toggle-ghosts"),
    Key("ctrl+t", "", "last finished answer: coloured tokens ⇄ rendered Markdown",
        "toggle_markdown", "Markdown", footer=True, priority=True,
        palette="Toggle Markdown view of last answer", palette_help="tokens ⇄ Markdown",
        id="toggle-markdown"),
    Key("ctrl+s", "", "speculation on / off for the next answer (A/B against target-only)",
        "toggle_speculation", "Spec on/off", footer=True, priority=True,
        palette="Toggle speculation (A/B)", palette_help="for the next answer",
        id="toggle-speculation"),
    Key("", "Ctrl+P", "command palette: k, temperature, slow-motion delay, theme, pair, charts, "
        "export…"),
    Key("f1", "", "this help", "help", "Help", footer=True, palette="Show keys (help)",
        palette_help="every key, as your keymap has them", owner="app", id="help"),
    Key("f2", "", "system prompt (Ctrl+S in the dialog saves; applies from the next answer)",
        "system_prompt", "System", palette="Edit system prompt",
        palette_help="applies from the next answer", owner="settings", id="system-prompt"),
    Key("f3", "", "switch pair: the new pair loads in the background while the current one "
        "keeps answering; the conversation carries over", "pick_pair", "Pair", footer=True,
        palette="Pick a pair…", palette_help="the list of pairs, loaded in the background",
        owner="settings", id="pick-pair"),
    Key("f4", "", "history: Enter reopens a conversation with its colours; `m` / `j` / `h` "
        "export Markdown / JSON / HTML; `d` deletes", "history", "History",
        palette="Open history", palette_help="reopen or export past conversations",
        owner="history", id="history"),
    Key("f5", "", "race: replay the last prompt target-only and show both tokens/s side by "
        "side, and whether the texts are identical", "race", "Race", footer=True,
        palette="Race: replay last prompt target-only", palette_help="compare tokens/s and text",
        owner="replays", id="race"),
    Key("ctrl+b", "", "float32 replay: answer the last prompt greedily in float32, speculative "
        "and target-only; they must be identical", "float32_check", "f32 check", priority=True,
        palette="Float32 replay: check lossless",
        palette_help="speculative and target-only, greedy, float32: must be identical",
        owner="replays", id="float32-check"),
    Key("ctrl+d", "", "charts: acceptance rate, τ and tokens/s per answer and per round, over "
        "the whole conversation", "show_charts", "Charts", priority=True, palette="Show charts",
        palette_help="acceptance, τ and tokens/s over the conversation", owner="charts",
        id="charts"),
    Key("f6", "", "presentation mode: wide gauges panel, large speedup digits, a taller "
        "sparkline", "toggle_presentation", "Present", priority=True,
        palette="Toggle presentation mode", palette_help="large gauges", owner="settings",
        id="toggle-presentation"),
    Key("f7", "", "step mode: each round stops with its drafts shown *pending*", "toggle_step",
        "Step mode", priority=True, palette="Toggle step mode", palette_help="pause every round",
        owner="pacing", id="toggle-step"),
    Key("f8,ctrl+f", "", "step: resolve the pending drafts into accepted / rejected / resampled "
        "/ bonus and let the next round come", "step", "Step", priority=True, owner="pacing",
        id="step"),
    Key("f9,alt+down", "", "k − 1 (applies from the next round)", "change_k(-1)", "k−",
        priority=True, owner="settings", id="k-down"),
    Key("f10,alt+up", "", "k + 1 (applies from the next round)", "change_k(1)", "k+",
        priority=True, owner="settings", id="k-up"),
    Key("f11,alt+left", "", "temperature − 0.1 (applies from the next round)",
        "change_temperature(-0.1)", "T−", priority=True, owner="settings", id="temperature-down"),
    Key("f12,alt+right", "", "temperature + 0.1 (applies from the next round)",
        "change_temperature(0.1)", "T+", priority=True, owner="settings", id="temperature-up"),
    Key("ctrl+l", "", "slow motion on / off (delay per round set in the palette, remembered)",
        "toggle_slow", "Slow", priority=True, palette="Toggle slow motion",
        palette_help="delay every round", owner="pacing", id="toggle-slow"),
)



@dataclass(frozen=True)
class DialogKey:
    """One key of a dialog (a modal screen): its binding runs the screen's own action."""

    dialog: str
    """The dialog, as the help names it."""
    keys: str
    action: str
    """The screen's action ("dismiss", "pick('json')")."""
    label: str
    help: str
    id: str
    """The binding's id, which a keymap names to move it."""
    priority: bool = False


DIALOG_KEYS: tuple[DialogKey, ...] = (
    DialogKey("help", "escape,f1,q", "dismiss", "Close", "close the help", "help-close"),
    DialogKey("system prompt", "ctrl+s", "save", "Save", "save; applies from the next answer",
              "system-prompt-save", priority=True),
    DialogKey("system prompt", "escape", "cancel", "Cancel", "close, keep the prompt as it was",
              "system-prompt-cancel"),
    DialogKey("pair picker", "escape", "dismiss(None)", "Cancel", "close, keep the pair",
              "pair-picker-cancel"),
    DialogKey("history", "m", "pick('markdown')", "Markdown",
              "export the highlighted conversation as Markdown", "history-markdown"),
    DialogKey("history", "j", "pick('json')", "JSON", "export it as JSON", "history-json"),
    DialogKey("history", "h", "pick('html')", "HTML", "export it as an HTML page",
              "history-html"),
    DialogKey("history", "d", "pick('delete')", "Delete", "delete it", "history-delete"),
    DialogKey("history", "escape", "dismiss(None)", "Close", "close the history",
              "history-close"),
    DialogKey("charts", "escape,q,ctrl+d", "dismiss", "Close", "close the charts",
              "charts-close"),
    DialogKey("confirm", "y", "dismiss(True)", "Yes", "yes: delete the conversation (asked in "
              "a served chat)", "confirm-yes"),
    DialogKey("confirm", "n,escape", "dismiss(False)", "No", "no: keep it", "confirm-no"),
)
"""The keys of the dialogs (Enter and the arrows are their lists' own)."""


def dialog_bindings(dialog: str) -> list[BindingType]:
    """A dialog's bindings, each with its id (a keymap moves it)."""
    return [Binding(key.keys, key.action, key.label, priority=key.priority, id=key.id)
            for key in DIALOG_KEYS if key.dialog == dialog]


def binding_ids() -> set[str]:
    """Every id a keymap may name: the chat's keys and the dialogs'."""
    keys: list[Key | DialogKey] = [*KEYS, *DIALOG_KEYS]
    return {key.id for key in keys if key.id}


COLOURS_HELP = """\
Colours: **accepted** draft tokens, **rejected** drafts (dim, struck through),
**resampled** (the target's correction), **bonus** (the target's extra token
after a full accept), **target** (plain decoding), **pending** (step mode).
"""


def bindings(keys: tuple[Key, ...] = KEYS) -> list[BindingType]:
    """The chat screen's bindings: every entry with keys, running its app action, with its id
    (a keymap moves it)."""
    return [Binding(key.keys, f"app.{key.action}", key.label, show=key.footer,
                    priority=key.priority, id=key.id) for key in keys if key.keys]


NAMES = {"escape": "Esc", "pageup": "PgUp", "pagedown": "PgDn"}


def key_name(key: str) -> str:
    """How people write one Textual key: "ctrl+f" -> "Ctrl+F", "f9" -> "F9", "alt+down" ->
    "Alt+Down", "escape" -> "Esc"; a plain letter as it is typed ("m")."""
    if len(key) == 1:
        return key
    return "+".join(NAMES.get(part) or (part.upper() if len(part) == 1 or re.fullmatch(r"f\d+", part)
                                        else part.capitalize()) for part in key.split("+"))


def shown_keys(key: Key | DialogKey, keymap: dict[str, str] | None = None) -> str:
    """The key's keys as the help shows them, a keymap's in place of the defaults."""
    if not key.keys:
        return key.shown if isinstance(key, Key) else ""
    names = (keymap or {}).get(key.id, key.keys)
    return " or ".join(key_name(name.strip()) for name in names.split(",") if name.strip())


def key_table(keys: tuple[Key, ...] = KEYS, keymap: dict[str, str] | None = None,
              ids: bool = False) -> str:
    """The Markdown table of every key and what it does (help screen, README, docs); with
    `ids`, each binding's id for keymap.toml."""
    rows = [[shown_keys(key, keymap), key.help] for key in keys]
    return keys_markdown(["key", "what it does"], rows, keys, ids)


def dialog_table(keymap: dict[str, str] | None = None, ids: bool = False) -> str:
    """The Markdown table of the dialogs' keys."""
    rows = [[key.dialog, shown_keys(key, keymap), key.help] for key in DIALOG_KEYS]
    return keys_markdown(["dialog", "key", "what it does"], rows, DIALOG_KEYS, ids)


def keys_markdown(columns: list[str], rows: list[list[str]],
                  keys: tuple[Key, ...] | tuple[DialogKey, ...], ids: bool) -> str:
    """A Markdown table with a row of cells per key; with `ids`, a last column of each key's
    binding id (for keymap.toml)."""
    if ids:
        listed: list[Key | DialogKey] = list(keys)
        columns, rows = [*columns, "id"], [[*row, id_cell(key)] for row, key in zip(rows, listed)]
    header = f"| {' | '.join(columns)} |\n|" + "---|" * len(columns)
    return header + "\n" + "\n".join(f"| {' | '.join(row)} |" for row in rows)


def keymap_of(screen: Screen) -> dict[str, str]:
    """The user's keymap in effect in the screen's app (binding id -> keys)."""
    return getattr(screen.app, "user_keymap", None) or {}


def dialog_hint(dialog: str, keymap: dict[str, str] | None = None) -> str:
    """A dialog's keys in one line, as the keymap has them: "m Markdown · … · Esc Close"."""
    return " · ".join(f"{shown_keys(key, keymap)} {key.label}"
                      for key in DIALOG_KEYS if key.dialog == dialog)


def id_cell(key: Key | DialogKey) -> str:
    return f"`{key.id}`" if key.id else ""


def help_markdown(keys: tuple[Key, ...] = KEYS, keymap: dict[str, str] | None = None) -> str:
    """The help screen: a table of every key and one of the dialogs' (as the keymap has
    them), then the colours."""
    return (f"# specchat keys\n\n{key_table(keys, keymap)}\n\n## In the dialogs\n\n"
            f"{dialog_table(keymap)}\n\n{COLOURS_HELP}")


def doc_tables() -> str:
    """What the docs hold between their key markers: both tables, with the ids."""
    return f"{key_table(ids=True)}\n\nIn the dialogs:\n\n{dialog_table(ids=True)}"


def with_key_table(text: str) -> str:
    """A document with the tables between its key markers rewritten from the key tables."""
    before, marker, rest = text.partition(TABLE_START)
    _, end, after = rest.partition(TABLE_END)
    if not marker or not end:
        raise ValueError(f"no {TABLE_START} ... {TABLE_END} markers")
    return f"{before}{TABLE_START}\n{doc_tables()}\n{TABLE_END}{after}"


def palette_actions(keys: tuple[Key, ...] = KEYS) -> list[tuple[str, str, str]]:
    """(title, help, action) for every key action the palette offers too."""
    return [(key.palette, key.palette_help, key.action) for key in keys if key.palette]


def owner_actions(keys: tuple[Key, ...] = KEYS) -> dict[str, Callable]:
    """The app's `action_<name>` methods for the keys its parts own: each runs the owner's
    action of the same name (`app.transcript.action_stop`, ...)."""
    return {f"action_{key.action_name}": _run_on(key.owner, key.action_name)
            for key in keys if key.action and key.owner != "app"}


def _run_on(owner: str, name: str) -> Callable:
    def action(app, *params):
        return getattr(getattr(app, owner), f"action_{name}")(*params)

    action.__doc__ = f"Run `{owner}.action_{name}`."
    return action


def main(files: list[str]) -> None:
    """Rewrite the key tables of the given documents (README.md docs/tui.md) from `KEYS`."""
    for name in files:
        path = Path(name)
        path.write_text(with_key_table(path.read_text()))


if __name__ == "__main__":
    main(sys.argv[1:] or ["README.md", "docs/tui.md"])
