"""Trial and demo features of the app: user themes, presentation mode, slow motion,
exports, the system prompt, the command palette's entries, and the chat command."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from click.testing import CliRunner
from tui_support import ask, make_app, ready, saved_conversation, streaming, wait_for

from specchat.tui.commands import palette_entries
from specchat.chat.scripted import token_id
from specchat.tui.transcript import AnswerView

SIZE = (150, 45)


def palette(app) -> dict:
    """The command palette's entries: title -> what choosing it runs."""
    return {title: callback for title, _, callback in palette_entries(app)}

USER_THEME = """
name = "my-theme"
dark = true
primary = "#112233"
background = "#000000"
foreground = "#dddddd"

[variables]
spec-accepted = "#00ff88"
spec-rejected = "#ff0044"
spec-resampled = "#ffaa00"
spec-bonus = "#00aaff"
spec-target = "#dddddd"
"""


async def test_a_theme_file_in_the_config_folder_becomes_a_theme():
    folder = Path(os.environ["SPECCHAT_CONFIG_DIR"]) / "themes"
    folder.mkdir(parents=True)
    (folder / "mine.toml").write_text(USER_THEME)
    app = make_app(theme="my-theme")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.theme == "my-theme"
        assert app.theme_variables["spec-accepted"].lower() == "#00ff88"
        assert "Theme: my-theme" in [title for title, _, _ in palette_entries(app)]


async def test_presentation_mode_shows_the_large_speedup_digits():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        big = app.gauges.query_one("#g-speedup-big")
        assert not big.display or big.region.height == 0
        await pilot.press("f6")
        await pilot.pause()
        assert app.screen.has_class("-presentation") and big.region.height > 0


async def test_slow_motion_spaces_rounds_by_the_configured_delay():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        palette(app)["Slow motion delay = 250 ms"]()
        started = time.perf_counter()
        await ask(pilot)
        assert time.perf_counter() - started >= 3 * 0.25 * 0.9  # three rounds
        assert json.loads((Path(os.environ["SPECCHAT_CONFIG_DIR"]) / "tui.json").read_text())[
            "slow_motion_ms"] == 250


async def test_exports_land_in_the_data_folder_without_ghost_text():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "export me")
        for title in ("Markdown", "JSON", "HTML"):
            palette(app)[f"Export conversation as {title}"]()
        exports = Path(os.environ["SPECCHAT_DATA_DIR"]) / "exports"
        markdown = next(exports.glob("*.md")).read_text()
        assert "Hello world a b c done." in markdown and "ghost" not in markdown
        page = next(exports.glob("*.html")).read_text()
        assert f".accepted{{color:{app.theme_variables['spec-accepted']}}}" in page
        data = json.loads(next(exports.glob("*.json")).read_text())
        assert data["turns"][1]["tokens"][1] == {"text": " ghost", "kind": "rejected", "id": token_id(" ghost")}


async def test_the_system_prompt_reaches_the_backend_and_the_history():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("f2")
        await wait_for(pilot, lambda: app.screen.query("#system-text"))
        await pilot.press(*"be terse", "ctrl+s")
        await wait_for(pilot, lambda: not app.screen.query("#system-text"))
        await ask(pilot)
        assert app.services["fake"].system == "be terse"
        assert saved_conversation().system == "be terse"


async def test_palette_entries_set_k_and_temperature():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        palette(app)["Set k = 7"]()
        palette(app)["Set temperature = 0.7"]()
        assert app.services["fake"].k == 7 and app.services["fake"].temperature == 0.7


def test_chat_command_rejects_an_unknown_theme_in_one_line():
    from specchat.cli import main

    result = CliRunner().invoke(main, ["chat", "--theme", "no-such-theme"])
    assert result.exit_code == 2
    assert "unknown theme 'no-such-theme'" in result.output and "Traceback" not in result.output


async def test_help_lists_the_keys_and_escape_closes_it():
    from specchat.tui.screens import HelpScreen

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))


async def test_regenerate_after_reopening_replaces_the_saved_answer():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "again please")
        await pilot.press("ctrl+n")
        await pilot.press("f4")
        await wait_for(pilot, lambda: app.screen.query("#history-list"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.query(AnswerView))
        first = app.query(AnswerView).first()
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.query(AnswerView).first() is not first
                       and not streaming(app))
        saved = saved_conversation()
        assert [(t.role, t.text) for t in saved.turns] == [
            ("user", "again please"), ("assistant", "Hello world a b c done.")]


def test_chat_help_names_the_options():
    from specchat.cli import main

    result = CliRunner().invoke(main, ["chat", "--help"])
    assert result.exit_code == 0
    for option in ("--pair", "--theme", "-k", "--temperature"):
        assert option in result.output


async def test_a_narrow_terminal_puts_the_gauges_under_the_conversation_and_back_when_widened():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await ask(pilot)
        await pilot.pause()
        transcript, gauges = app.transcript.region, app.gauges.region
        assert gauges.y >= transcript.bottom and gauges.width >= 78 and transcript.width >= 78
        line = app.gauges.query_one("#g-tps-line")
        assert line.display and "tokens/s" in str(line.render()) and line.region.height == 1
        assert not app.gauges.query_one("#g-tps").display
        await pilot.resize_terminal(130, 40)
        await pilot.pause()
        transcript, gauges = app.transcript.region, app.gauges.region
        assert gauges.x >= transcript.right and gauges.y == transcript.y
        assert app.gauges.query_one("#g-tps").display and not app.gauges.query_one("#g-tps-line").display


async def test_a_24_row_terminal_shows_the_speedup_in_the_panels_first_visible_line():
    """At 80×24 the panel under the conversation shows 6 rows; the speedup's own line is
    below them. The first line carries it (the scripted pair's 3.33×, worked by hand in
    test_tui_app.py's gauge test), and says so when speculation is off."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await ask(pilot)
        await wait_for(pilot, lambda: app.gauges.stats is not None and app.gauges.stats.rounds == 3)
        await pilot.pause()
        line = app.gauges.query_one("#g-tps-line")
        panel = app.gauges.region
        assert panel.y <= line.region.y < panel.bottom and line.region.height == 1
        assert str(line.render()).endswith("· speedup 3.33×")
        assert app.gauges.query_one("#g-speedup").region.y >= panel.bottom
        await pilot.press("ctrl+s")
        await ask(pilot)
        await pilot.pause()
        assert str(line.render()).endswith("· speculation off")


def saved_titles() -> list[str]:
    from specchat.history.store import HistoryStore

    store = HistoryStore()
    try:
        return [conversation.title for conversation in store.list_conversations()]
    finally:
        store.close()


async def delete_from_history(pilot) -> None:
    """F4, then `d` on the highlighted (most recent) conversation."""
    await pilot.press("f4")
    await wait_for(pilot, lambda: pilot.app.screen.query("#history-list"))
    await pilot.press("d")
    await wait_for(pilot, lambda: not pilot.app.screen.query("#history-list"))
    await pilot.pause()


async def test_a_served_chat_asks_before_deleting_a_saved_conversation():
    from specchat.tui.screens import ConfirmScreen

    app = make_app(served=True)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "keep [b]me[/]")  # a title is shown as typed, never as markup
        await delete_from_history(pilot)
        assert isinstance(app.screen, ConfirmScreen) and saved_titles() == ["keep [b]me[/]"]
        assert "“keep [b]me[/]”?" in str(app.screen.query_one("#confirm-question").render())
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert saved_titles() == ["keep [b]me[/]"]
        await delete_from_history(pilot)
        await pilot.press("y")
        await wait_for(pilot, lambda: saved_titles() == [])


async def test_a_chat_in_a_terminal_deletes_a_saved_conversation_at_once():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "delete me")
        await delete_from_history(pilot)
        await wait_for(pilot, lambda: saved_titles() == [])


def test_specchat_chat_served_builds_a_chat_that_asks_before_deleting(monkeypatch):
    import specchat.commands.chat as chat_command
    from specchat.cli import main

    built = []

    def build_demo_app(rate, theme, system, served=False):
        built.append(served)
        raise SystemExit(0)

    monkeypatch.setattr(chat_command, "build_demo_app", build_demo_app)
    for args in (["chat", "--demo", "5", "--served"], ["chat", "--demo", "5"]):
        CliRunner().invoke(main, args)
    assert built == [True, False]
