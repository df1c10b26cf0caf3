"""Themes and remembered preferences for the TUI.

Maps the theme files (`specchat.theme_files.ThemeSpec`: built-ins in `themes/`,
user themes in the config directory) onto `textual.theme.Theme`, with the token
colours as theme variables, and offers Textual's own themes beside them (their token
colours derived from the colours Textual computes for them: success / error / warning /
accent / foreground and their text variants, readable on the theme's background and the
four fates apart, by specchat.fate_colours).
Theme files are checked by Textual's rules (tui/theme_rules.py, which `run` uses too); a
broken file is skipped and named. Preferences (theme, slow-motion delay, ghosts) live in a
small JSON file in the config directory.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from textual.color import Color
from textual.theme import BUILTIN_THEMES, Theme

from specchat import paths
from specchat.errors import ConfigError
from specchat.fate_colours import derived_token_colours
from specchat.theme_files import (DEFAULT_THEME, DEFAULT_TOKEN_COLOURS, TOKEN_SOURCES,
                                  ThemeProblem, ThemeSpec, load_themes, page_colours)
from specchat.tui.theme_rules import TextualRules

ALTERNATES = ("primary", "secondary")
"""Theme colours a fate falls back to when its own is too close to another fate's."""


def to_textual(spec: ThemeSpec) -> Theme:
    """A Textual theme whose variables include spec-accepted, spec-rejected, ..."""
    colours: dict[str, Any] = dict(spec.colors)  # Theme's colour arguments, by name
    return Theme(name=spec.name, dark=spec.dark, variables=dict(spec.variables), **colours)


def computed_colours(theme: Theme) -> dict[str, str]:
    """The colours Textual computes for a theme (its CSS variables: foreground and
    background for every theme, text-success and the like), as text."""
    return {name: str(value) for name, value in theme.to_color_system().generate().items()}


def drawable(theme: Theme) -> Theme:
    """The theme, once Textual has made its colour system from it (which raises if it cannot)."""
    theme.to_color_system().generate()
    return theme


def with_token_colours(theme: Theme) -> Theme:
    """One of Textual's own themes, its token colours derived from the colours Textual
    computes for it: each from its source colour (as the theme names it, as Textual
    computes it, Textual's text variant of it), then the alternates, then specchat-dark's
    (its own, then its others); readable on its background, the fates apart."""
    computed = computed_colours(theme)

    def options(source: str) -> list[str | None]:
        return [getattr(theme, source, None), computed.get(source), computed.get(f"text-{source}")]

    candidates = {name: [colour for key in (source, *ALTERNATES) for colour in options(key)]
                  + [DEFAULT_TOKEN_COLOURS[name], *DEFAULT_TOKEN_COLOURS.values()]
                  for name, source in TOKEN_SOURCES.items()}
    given = {k: str(v) for k, v in theme.variables.items() if k in TOKEN_SOURCES}
    variables = derived_token_colours(candidates, computed["background"], given)
    return dataclasses.replace(theme, variables={**theme.variables, **variables})


def theme_page_colours(theme: Theme) -> dict[str, str]:
    """A theme's colours for a static page (the HTML export), every one a CSS colour:
    terminal palette colours as Textual draws them."""
    variables = {k: str(v) for k, v in theme.variables.items() if k in TOKEN_SOURCES}
    return {kind: css_colour(value, theme.dark, kind)
            for kind, value in page_colours(computed_colours(theme), variables).items()}


def css_colour(text: str, dark: bool, role: str) -> str:
    """A colour a browser understands: "#rrggbb" as it is; a terminal palette colour as
    Textual's value for it; the terminal's own default as black or white."""
    colour = Color.parse(text)
    if colour.ansi == -1:  # the terminal's default colour
        return "#000000" if dark == (role == "background") else "#ffffff"
    return Color(colour.r, colour.g, colour.b).hex if colour.ansi is not None else text


def named_theme(name: str | None) -> Theme:
    """The theme by name, specchat's or Textual's; a one-line ConfigError naming the file
    for a theme whose file is broken, or the themes there are for an unknown one."""
    themes, problems = load_textual_themes()
    name = name or DEFAULT_THEME
    if name in themes:
        return themes[name]
    broken = next((problem for problem in problems if problem.name == name), None)
    if broken:
        raise ConfigError(str(broken))
    error = unknown_theme_error(name, themes, problems)
    assert error is not None, "neither loaded nor broken"
    raise error


def load_textual_themes() -> tuple[dict[str, Theme], list[ThemeProblem]]:
    """specchat's themes (the files that read), then Textual's own under their names; and a
    problem for each theme file skipped."""
    specs, problems = load_themes(TextualRules())
    themes = {}
    for name, spec in specs.items():
        try:
            themes[name] = drawable(to_textual(spec))
        except Exception as error:  # what the rules let through but Textual refuses: skip it
            problems.append(ThemeProblem(Path(spec.source), f"Textual cannot draw it ({error})", name))
    for name, theme in BUILTIN_THEMES.items():
        themes.setdefault(name, with_token_colours(theme))
    return themes, problems


def check_theme_name(name: str) -> None:
    """A one-line `ConfigError` for a theme no file and no Textual theme defines. A theme
    whose file is broken passes: the chat starts on the default theme and says why."""
    error = unknown_theme_error(name, *load_textual_themes())
    if error:
        raise error


def unknown_theme_error(name: str, themes: dict[str, Theme],
                        problems: list[ThemeProblem]) -> ConfigError | None:
    """The one-line error for a theme neither loaded (`themes`) nor skipped as broken
    (`problems`), naming the themes there are; None for a theme that is either."""
    if name in themes or name in {problem.name for problem in problems}:
        return None
    return ConfigError(f"unknown theme '{name}': available are {', '.join(sorted(themes))} "
                       f"(user themes go in {paths.user_themes_dir()})")


@dataclass
class Preferences:
    """What the TUI remembers between runs."""

    theme: str = DEFAULT_THEME
    """Name of the last theme chosen."""
    slow_motion_ms: int = 300
    """Delay after each round in slow motion."""
    ghosts: bool = True
    """Whether rejected drafts are shown."""


def preferences_file() -> Path:
    return paths.config_dir() / "tui.json"


def load_preferences(path: Path | None = None) -> Preferences:
    """The saved preferences; defaults where the file is missing or unreadable."""
    path = path or preferences_file()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return Preferences()
    known = {f.name for f in fields(Preferences)}
    values = {key: value for key, value in data.items() if key in known} if isinstance(data, dict) else {}
    try:
        return Preferences(**values)
    except TypeError:
        return Preferences()


def save_preferences(preferences: Preferences, path: Path | None = None) -> None:
    path = path or preferences_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(preferences), indent=2) + "\n")
    except OSError:
        pass  # preferences are a convenience; never fail the app over them
