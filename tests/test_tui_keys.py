"""One key table (specchat.tui.keys) makes the chat's bindings, the help screen, the
palette's action entries and the docs' key tables: each names the same keys and actions.
Every binding has an id a user's keymap can move; F9-F12 have second keys."""

from __future__ import annotations

import re

from textual.widgets import Markdown
import os
from pathlib import Path

from tui_support import make_app, ready, wait_for

from specchat.tui.chat_screen import ChatScreen
from specchat.tui.charts import ChartsScreen
from specchat.tui.keys import (DIALOG_KEYS, KEYS, bindings, doc_tables, help_markdown,
                               palette_actions, with_key_table)
from specchat.tui.screens import (ConfirmScreen, HelpScreen, HistoryScreen, PairPickerScreen,
                                  SystemPromptScreen)


def action_name(action: str) -> str:
    return action.removeprefix("app.").split("(")[0]


def test_every_bound_action_exists_on_the_app():
    app = make_app()
    missing = [b.action for b in bindings() if not hasattr(app, f"action_{action_name(b.action)}")]
    assert missing == []


def test_every_keys_action_is_defined_by_the_part_of_the_app_that_owns_it():
    app = make_app()
    owners = {key.owner for key in KEYS if key.action}
    assert owners == {"app", "transcript", "pacing", "replays", "settings", "history", "charts"}
    missing = [(key.owner, key.action_name) for key in KEYS if key.action
               and not callable(getattr(getattr(app, key.owner) if key.owner != "app" else app,
                                        f"action_{key.action_name}", None))]
    assert missing == []


def test_the_chat_screen_binds_exactly_the_tables_keys():
    bound = {b.key: b.action for b in ChatScreen.BINDINGS}
    table = {key.keys: f"app.{key.action}" for key in KEYS if key.keys}
    assert bound == table and "f8,ctrl+f" in bound


def test_the_help_table_has_a_row_for_every_key_and_only_those():
    rows = [line for line in help_markdown().splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == len(KEYS) + 1 + len(DIALOG_KEYS) + 1  # each table's header row
    assert any(row.startswith("| F8 or Ctrl+F | step: resolve the pending drafts") for row in rows)


def test_palette_actions_are_bound_keys_too():
    bound = {key.action for key in KEYS if key.keys}
    assert palette_actions() and {action for _, _, action in palette_actions()} <= bound


async def test_f1_opens_the_help_built_from_the_table():
    app = make_app()
    async with app.run_test(size=(120, 60)) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        source = app.screen.query_one(Markdown).source
        assert source == help_markdown()
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))


ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_and_docs_key_tables_are_the_ones_the_key_table_renders():
    for name in ("README.md", "docs/tui.md"):
        text = (ROOT / name).read_text()
        assert doc_tables() in text and with_key_table(text) == text, (
            f"{name}'s key table is stale: run python -m specchat.tui.keys")


def test_every_binding_has_its_own_id():
    screens = (ChatScreen, HelpScreen, SystemPromptScreen, PairPickerScreen, HistoryScreen,
               ChartsScreen, ConfirmScreen)
    every = [(screen.__name__, binding) for screen in screens for binding in screen.BINDINGS]
    assert len(every) == len(bindings()) + len(DIALOG_KEYS)
    missing = [(screen, binding.key) for screen, binding in every if not binding.id]
    assert missing == []
    ids = [binding.id for _, binding in every]
    assert len(ids) == len(set(ids))


def test_every_f_key_action_has_a_second_key_or_a_palette_entry():
    """macOS laptops take the F-keys (media keys), GNOME takes F10 and F11."""
    def only_f_keys(keys: str) -> bool:
        names = [name.strip() for name in keys.split(",") if name.strip()]
        return bool(names) and all(re.fullmatch(r"f\d+", name) for name in names)

    f_keys = [key.id for key in KEYS if re.search(r"\bf\d+\b", key.keys)]
    assert len(f_keys) == 12
    assert [key.id for key in KEYS if only_f_keys(key.keys) and not key.palette] == []


async def test_k_and_temperature_answer_to_a_second_key_beside_f9_to_f12():
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        service = app.services["fake"]
        k, temperature = service.k, service.temperature
        await pilot.press("alt+up", "alt+right")
        await wait_for(pilot, lambda: (service.k, round(service.temperature, 2))
                       == (k + 1, round(temperature + 0.1, 2)))
        await pilot.press("alt+down", "alt+left")
        await wait_for(pilot, lambda: (service.k, round(service.temperature, 2))
                       == (k, round(temperature, 2)))


def keymap(text: str) -> None:
    folder = Path(os.environ["SPECCHAT_CONFIG_DIR"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "keymap.toml").write_text(text)


async def test_a_keymap_moves_a_key_and_the_help_shows_the_keys_in_effect():
    keymap('[keys]\nk-up = "ctrl+up"\n')
    app = make_app()
    async with app.run_test(size=(120, 60)) as pilot:
        await ready(pilot)
        service = app.services["fake"]
        k = service.k
        await pilot.press("f10")  # moved away: no longer k + 1
        await pilot.pause()
        assert service.k == k
        await pilot.press("ctrl+up")
        await wait_for(pilot, lambda: service.k == k + 1)
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert "| Ctrl+Up | k + 1" in app.screen.query_one(Markdown).source


async def test_a_bad_keymap_entry_is_named_on_screen_and_the_rest_applies():
    keymap('[keys]\nk-upp = "ctrl+up"\nk-down = 3\ntemperature-up = "ctrl+right"\n')
    app = make_app()
    async with app.run_test(size=(150, 45)) as pilot:
        await ready(pilot)
        shown = str(app.chat_screen.problems.render())
        assert "unknown key id 'k-upp'" in shown and "'k-down' must be key names" in shown
        temperature = app.services["fake"].temperature
        await pilot.press("ctrl+right")
        await wait_for(pilot, lambda: app.services["fake"].temperature > temperature)


async def test_the_palette_opens_the_help_and_the_pair_picker_without_f1_or_f3():
    for title, screen in (("Show keys", HelpScreen), ("Pick a pair", PairPickerScreen)):
        app = make_app()
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot)
            await pilot.press("ctrl+p")
            await pilot.pause(0.2)
            await pilot.press(*title.lower())
            await pilot.pause(0.5)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, screen))


async def test_a_keymap_moves_the_dialogs_keys_and_their_hints_say_so():
    keymap('[keys]\nhelp-close = "ctrl+w"\ncharts-close = "c"\nhistory-delete = "x"\n')
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert not str(app.chat_screen.problems.render()).strip()
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert isinstance(app.screen, HelpScreen)  # Esc was moved away
        await pilot.press("ctrl+w")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))
        await pilot.press("ctrl+d")
        await wait_for(pilot, lambda: isinstance(app.screen, ChartsScreen))
        hint = str(app.screen.query_one(".dialog-hint").render())
        assert hint.startswith("c Close")
        await pilot.press("c")
        await wait_for(pilot, lambda: not isinstance(app.screen, ChartsScreen))
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
        assert "x Delete" in "".join(str(w.render()) for w in app.screen.query("Static"))
