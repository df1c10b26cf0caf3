"""A bad theme never stops the chat (issue 24): a theme file with a wrong colour or key is
skipped, the chat starts on a good theme and says which file and key are wrong in a line
that stays on screen; `run` says so on stderr and answers in the default colours. Textual's
own themes are selectable too, with token colours derived from their own colours."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner
from tui_support import make_app, ready

from specchat.theme_files import load_themes, token_colours

SIZE = (150, 45)
BAD_COLOUR = """
name = "broken"
primary = "#zz2233"

[variables]
spec-accepted = "#00ff88"
"""
BAD_KEY = """
name = "specchat-dark"
primaryy = "#112233"
"""


def user_theme(name: str, text: str) -> Path:
    folder = Path(os.environ["SPECCHAT_CONFIG_DIR"]) / "themes"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


def problem_lines(app) -> str:
    bar = app.chat_screen.problems
    return str(bar.render()) if bar.display else ""


async def test_a_bad_theme_asked_for_by_name_starts_the_chat_on_the_default_and_says_why():
    file = user_theme("broken.toml", BAD_COLOUR)
    app = make_app(theme="broken")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        shown = problem_lines(app)
        assert app.theme == "specchat-dark"
        assert str(file) in shown and "'primary'" in shown and "#zz2233" in shown
        assert "theme 'broken': its file was skipped" in shown
        await pilot.pause(1.0)
        assert problem_lines(app) == shown  # it stays: no toast that fades


async def test_a_bad_file_overriding_a_builtin_theme_keeps_the_builtin_and_says_so():
    file = user_theme("dark.toml", BAD_KEY)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.theme == "specchat-dark"
        assert app.theme_variables["spec-accepted"].lower() == "#9ece6a"  # the built-in's
        assert str(file) in problem_lines(app) and "unknown key 'primaryy'" in problem_lines(app)


async def test_no_problem_line_when_every_theme_reads():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert not app.chat_screen.problems.display


async def test_textuals_own_themes_are_selectable_with_derived_token_colours():
    from textual.theme import BUILTIN_THEMES

    from specchat.tui.commands import palette_entries

    app = make_app(theme="nord")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.theme == "nord"
        nord = BUILTIN_THEMES["nord"]
        assert app.theme_variables["spec-accepted"].lower() == nord.success.lower()
        assert app.theme_variables["spec-rejected"].lower() != "#f7768e"  # not specchat-dark's
        assert "Theme: gruvbox" in [title for title, _, _ in palette_entries(app)]


def test_token_colours_fall_back_to_the_themes_own_then_the_defaults():
    colours = token_colours({"success": "#010101", "error": None}, {"spec-bonus": "#020202"})
    assert colours["spec-accepted"] == "#010101" and colours["spec-bonus"] == "#020202"
    assert colours["spec-rejected"] == "#f7768e"  # specchat-dark's, where the theme has none


def test_a_theme_file_that_is_not_toml_is_skipped_with_its_name():
    file = user_theme("mine.toml", "name = \n")
    themes, problems = load_themes()
    assert "specchat-dark" in themes and [p.file for p in problems] == [file]
    assert "cannot be read as TOML" in str(problems[0])


def test_chat_with_a_broken_theme_by_name_is_no_error_but_an_unknown_name_is(monkeypatch):
    from specchat.tui.themes import check_theme_name

    user_theme("broken.toml", BAD_COLOUR)
    check_theme_name("broken")  # its file is broken: the chat starts and says why
    check_theme_name("gruvbox")  # Textual's own
    from specchat.errors import ConfigError

    try:
        check_theme_name("no-such-theme")
    except ConfigError as error:
        assert "unknown theme 'no-such-theme'" in str(error) and "\n" not in str(error)
    else:
        raise AssertionError("an unknown theme name must be refused")


def test_run_names_a_broken_default_theme_on_stderr_and_answers(tiny_config, monkeypatch):
    from specchat.cli import main

    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal: run paints with the theme's colours
    file = user_theme("dark.toml", BAD_KEY)
    result = CliRunner().invoke(main, ["run", "--config", str(tiny_config), "--pair", "tiny",
                                       "--max-new-tokens", "4", "hello"])
    assert result.exit_code == 0, result.output
    assert f"theme file {file}: unknown key 'primaryy'" in result.output


P = 'primary = "#123456"\n'
BAD_TEXTUAL_VARIABLE = """
name = "specchat-dark"
primary = "#112233"

[variables]
input-cursor-background = "zz"
"""


async def test_a_bad_textual_variable_in_a_file_named_like_a_builtin_never_locks_the_chat_out():
    file = user_theme("mydark.toml", BAD_TEXTUAL_VARIABLE)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        shown = problem_lines(app)
        assert app.theme == "specchat-dark"
        assert app.theme_variables["primary"].lower() != "#112233"  # the built-in's, not the file's
        assert str(file) in shown and "'variables.input-cursor-background' = \"zz\"" in shown
        assert "is not a colour" in shown


async def test_an_unknown_textual_variable_is_named_and_the_theme_still_used():
    file = user_theme("mine.toml", f'name = "mine"\n{P}[variables]\nfoooter-background = "#101010"\n'
                                   'text = "auto 80%"\nlink-style = "bold"\n')
    app = make_app(theme="mine")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.theme == "mine"
        shown = problem_lines(app)
        assert f"theme file {file}: unknown variable 'variables.foooter-background'" in shown
        assert "ignored it" in shown and "skipped" not in shown


BAD_SHAPES = {
    f'name = "x"\n{P}dark = "no"\n': "'dark' must be true or false",
    f'name = "x"\n{P}[variables]\nspec-bonuss = "#ffffff"\n': "unknown token colour 'variables.spec-bonuss'",
    f'name = "x"\n{P}[variables]\nlink-style = "zz"\n': "'variables.link-style' = \"zz\" is not a text style",
    f'name = "x"\n{P}[variables]\nfooter-background = "auto 87%"\n':
        "'variables.footer-background' = \"auto 87%\" is not a colour",
    f'name = 5\n{P}': "'name' must be text in quotes",
    f'name = "x"\n{P}[variables]\nborder = 7\n': "'variables.border' must be text in quotes",
    'name = "x"\n': "'primary' is missing",
}


def test_every_wrong_value_of_a_theme_file_is_named_by_its_key():
    from specchat.tui.themes import load_textual_themes

    for number, (text, message) in enumerate(BAD_SHAPES.items()):
        user_theme(f"bad{number}.toml", text)
    themes, problems = load_textual_themes()
    shown = [str(problem) for problem in problems]
    for number, message in enumerate(BAD_SHAPES.values()):
        mine = [line for line in shown if f"bad{number}.toml" in line]
        assert len(mine) == 1 and message in mine[0] and mine[0].endswith("skipped it"), (message, shown)
    assert "x" not in themes


def token_theme(colour: str) -> Path:
    """specchat-dark overridden with every token in one colour."""
    tokens = "".join(f'spec-{kind} = "{colour}"\n'
                     for kind in ("accepted", "rejected", "resampled", "bonus", "target"))
    return user_theme("tokens.toml", f'name = "specchat-dark"\nprimary = "#7aa2f7"\n[variables]\n{tokens}')


async def chat_takes(colour: str) -> bool:
    """Whether the chat uses a token colour (else it names the file on its problem line)."""
    file = token_theme(colour)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        taken = app.theme_variables["spec-bonus"] == colour
        assert taken != (str(file) in problem_lines(app))
        return taken


def run_takes(colour: str, config: Path) -> tuple[bool, str]:
    """Whether `run` paints with a token colour (else it names the file on stderr); its output."""
    from specchat.cli import main

    file = token_theme(colour)
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--pair", "tiny",
                                       "--max-new-tokens", "4", "hello"], env={"FORCE_COLOR": "1", "COLORTERM": "truecolor"})
    assert result.exit_code == 0, result.output
    return str(file) not in result.output, result.output


async def test_the_chat_and_run_accept_and_refuse_the_same_colours(tiny_config):
    """One judge: hsl() (Textual reads it, rich does not) is drawn by both; bright_red and
    grey50 (rich reads them, Textual does not) are refused by both, naming the file."""
    assert await chat_takes("hsl(120,50%,50%)")
    taken, output = run_takes("hsl(120,50%,50%)", tiny_config)
    assert taken and "\x1b[38;2;64;191;64m" in output  # hsl(120,50%,50%) is #40bf40
    for colour in ("bright_red", "grey50"):
        assert not await chat_takes(colour)
        taken, output = run_takes(colour, tiny_config)
        assert not taken and f'"{colour}" is not a colour' in output
