"""Token colours in every selectable theme (issue 26, item 3): where a theme names none,
they come from the colours Textual computes for it, readable on its background (a WCAG
contrast floor, measured here with the standard formula) and with the four fates apart;
`specchat history export --theme` takes Textual's themes too."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from textual.color import Color
from textual.theme import BUILTIN_THEMES
from tui_support import make_app, ready

from specchat.cli import main
from specchat.fate_colours import CONTRAST_FLOOR

TOKEN_VARIABLES = ("spec-accepted", "spec-rejected", "spec-resampled", "spec-bonus", "spec-target")
FATE_VARIABLES = TOKEN_VARIABLES[:4]
PALETTE_THEMES = {"ansi-dark", "ansi-light"}
"""Textual's themes in the terminal's own palette: no colour value to measure contrast by."""


def wcag_contrast(a: Color, b: Color) -> float:
    def luminance(colour: Color) -> float:
        def linear(c: int) -> float:
            c = c / 255
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
        return 0.2126 * linear(colour.r) + 0.7152 * linear(colour.g) + 0.0722 * linear(colour.b)

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_contrast_measure_is_the_wcag_one():
    assert wcag_contrast(Color.parse("#000000"), Color.parse("#ffffff")) == pytest.approx(21)
    assert wcag_contrast(Color.parse("#777777"), Color.parse("#ffffff")) == pytest.approx(4.48, abs=0.01)


async def themes_as_shown() -> dict[str, dict[str, str]]:
    """Each selectable theme's variables as the chat has them once the theme is chosen."""
    app = make_app()
    shown = {}
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        for name in sorted(app.available_themes):
            app.theme = name
            await pilot.pause()
            shown[name] = dict(app.theme_variables)
    return shown


@pytest.fixture(scope="module")
def shown_themes(tmp_path_factory) -> dict[str, dict[str, str]]:
    """Once per module (before the per-test folders exist): its own folders."""
    import asyncio

    folder = tmp_path_factory.mktemp("themes")
    with pytest.MonkeyPatch.context() as patch:
        for name in ("CONFIG", "DATA", "LOG"):
            patch.setenv(f"SPECCHAT_{name}_DIR", str(folder / name.lower()))
        return asyncio.run(themes_as_shown())


@pytest.mark.parametrize("name", sorted(set(BUILTIN_THEMES) - PALETTE_THEMES))
def test_every_token_colour_of_textuals_themes_reads_on_its_background(shown_themes, name):
    variables = shown_themes[name]
    background = Color.parse(variables["background"])
    low = {key: round(wcag_contrast(Color.parse(variables[key]), background), 2)
           for key in TOKEN_VARIABLES
           if wcag_contrast(Color.parse(variables[key]), background) < CONTRAST_FLOOR - 0.01}
    assert low == {}, f"{name} on {variables['background']}: {low}"


def test_target_only_text_in_textual_light_is_dark_on_its_light_background(shown_themes):
    variables = shown_themes["textual-light"]
    target, background = Color.parse(variables["spec-target"]), Color.parse(variables["background"])
    assert background.brightness > 0.8 and target.brightness < 0.3
    assert wcag_contrast(target, background) >= CONTRAST_FLOOR


def test_the_four_fates_never_share_a_colour_in_any_selectable_theme(shown_themes):
    assert set(BUILTIN_THEMES) | {"specchat-dark", "specchat-light"} <= set(shown_themes)
    clashes = []
    for name, variables in shown_themes.items():
        colours = {key: variables[key] for key in FATE_VARIABLES}
        for i, a in enumerate(FATE_VARIABLES):
            for b in FATE_VARIABLES[i + 1:]:
                if same_looking(colours[a], colours[b]):
                    clashes.append(f"{name}: {a} {colours[a]} ~ {b} {colours[b]}")
    assert clashes == []
    assert shown_themes["ansi-dark"]["spec-accepted"] != shown_themes["ansi-dark"]["spec-bonus"]


def same_looking(a: str, b: str) -> bool:
    """Palette colours by name (bright or not); others less than 30 apart in CIE L*a*b*
    (CIE76 ΔE: about where two text colours start to read as one)."""
    first, second = Color.parse(a), Color.parse(b)
    if first.ansi is not None or second.ansi is not None:
        return a.replace("bright_", "") == b.replace("bright_", "")
    return sum((p - q) ** 2 for p, q in zip(cie_lab(first), cie_lab(second))) ** 0.5 < 30


def cie_lab(colour: Color) -> tuple[float, float, float]:
    def linear(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in colour.rgb)
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883
    f = [v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def test_textuals_themes_keep_their_own_colours_where_they_read(shown_themes):
    dracula = BUILTIN_THEMES["dracula"]
    own = {"spec-accepted": dracula.success, "spec-rejected": dracula.error,
           "spec-resampled": dracula.warning, "spec-bonus": dracula.accent}
    assert {key: shown_themes["dracula"][key].lower() for key in own} == {
        key: colour.lower() for key, colour in own.items()}
    assert shown_themes["specchat-light"]["spec-bonus"] == "#0969da"  # named in its file


@pytest.mark.parametrize("theme", ["nord", "ansi-dark", "textual-light"])
def test_history_export_takes_textuals_themes_with_css_colours(tmp_path, theme):
    from test_cli_conventions import saved_history

    path = saved_history(tmp_path)
    result = CliRunner().invoke(main, ["history", "export", "1", "--format", "html", "--theme",
                                       theme, "--history-file", str(path)])
    assert result.exit_code == 0, result.output
    colours = dict(re.findall(r"\.(accepted|rejected|resampled|bonus)\{color:([^;}]+)", result.output))
    assert set(colours) == {"accepted", "rejected", "resampled", "bonus"}
    assert all(re.fullmatch(r"#[0-9a-fA-F]{6}", value) for value in colours.values()), colours
    if theme == "nord":
        assert colours["accepted"].lower() == BUILTIN_THEMES["nord"].success.lower()
