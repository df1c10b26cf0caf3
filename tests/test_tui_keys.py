"""One key table (specchat.tui.keys) makes the chat's bindings, the help screen and
the palette's action entries: each names the same keys and actions."""

from __future__ import annotations

from textual.widgets import Markdown
from tui_support import make_app, ready, wait_for

from specchat.tui.chat_screen import ChatScreen
from specchat.tui.keys import KEYS, bindings, help_markdown, palette_actions
from specchat.tui.screens import HelpScreen


def action_name(action: str) -> str:
    return action.removeprefix("app.").split("(")[0]


def test_every_bound_action_exists_on_the_app():
    app = make_app()
    missing = [b.action for b in bindings() if not hasattr(app, f"action_{action_name(b.action)}")]
    assert missing == []


def test_every_keys_action_is_defined_by_the_part_of_the_app_that_owns_it():
    app = make_app()
    owners = {key.owner for key in KEYS if key.action}
    assert owners == {"app", "conversation", "settings", "history"}
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
    assert len(rows) == len(KEYS) + 1  # the header row
    assert "| F8 or Ctrl+F | step: resolve the pending round |" in rows


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
