"""Theme files: one TOML per theme, built-ins shipped in `themes/`, user themes in
the config directory (a user theme of the same name wins).

Pure data (tomllib): the TUI maps a `ThemeSpec` onto `textual.theme.Theme`, the CLI
reads the token colours for ANSI output. Token colours are the theme variables
`spec-accepted`, `spec-rejected`, `spec-resampled`, `spec-bonus`, `spec-target`; a theme
that leaves one out gets it from its own success / error / warning / accent / foreground
colours (`token_colours`), so Textual's own themes have them too.

A broken file never stops anything: `load_themes` skips it and says which file and key
are wrong (`ThemeProblem`), and the caller shows that where it stays on screen. Colours
are checked by the caller's parser (`ColourCheck`: Textual's in the chat, rich's for
`run`), since this module may import neither.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from specchat import paths
from specchat.errors import ConfigError

DEFAULT_THEME = "specchat-dark"
TOKEN_VARIABLES = ("spec-accepted", "spec-rejected", "spec-resampled", "spec-bonus", "spec-target")
COLOR_KEYS = ("primary", "secondary", "accent", "foreground", "background", "surface", "panel",
              "success", "warning", "error", "boost")
DEFAULT_TOKEN_COLOURS = {"spec-accepted": "#9ece6a", "spec-rejected": "#f7768e",
                         "spec-resampled": "#e0af68", "spec-bonus": "#7dcfff",
                         "spec-target": "#c0caf5", "spec-pending": "#bb9af7"}
"""specchat-dark's token colours: the last resort where a theme names no colour to derive from."""
TOKEN_SOURCES = {"spec-accepted": "success", "spec-rejected": "error",
                 "spec-resampled": "warning", "spec-bonus": "accent",
                 "spec-target": "foreground", "spec-pending": "secondary"}
"""The theme colour each token colour falls back to: kept green, thrown away red, ..."""

ColourCheck = Callable[[str], bool]
"""Whether a text is a colour the caller's renderer can draw."""


@dataclass(frozen=True)
class ThemeSpec:
    """A theme as written in its TOML file."""

    name: str
    dark: bool = True
    colors: dict[str, str] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)
    source: str = ""

    def token_color(self, kind: str) -> str:
        return self.variables[f"spec-{kind}"]


@dataclass(frozen=True)
class ThemeProblem:
    """A theme file that was skipped, and why."""

    file: Path
    message: str
    name: str
    """The theme the file would have defined (its `name`, else the file's stem)."""

    def __str__(self) -> str:
        return f"theme file {self.file}: {self.message}; skipped it"


def token_colours(colors: dict[str, str | None], variables: dict[str, str]) -> dict[str, str]:
    """The theme's variables with every token colour set: its own, else derived from its
    colours, else specchat-dark's."""
    derived = {name: colors.get(source) or DEFAULT_TOKEN_COLOURS[name]
               for name, source in TOKEN_SOURCES.items()}
    return {**derived, **variables}


def page_colours(colors: dict[str, str | None], variables: dict[str, str]) -> dict[str, str]:
    """A theme's colours for a static page (the HTML export): each token kind's colour by
    kind, and the page's foreground and background."""
    tokens = token_colours(colors, variables)
    kinds = {name.removeprefix("spec-"): colour for name, colour in tokens.items()}
    return kinds | {"foreground": colors.get("foreground") or tokens["spec-target"],
                    "background": colors.get("background") or "#ffffff"}


def theme_dirs() -> list[Path]:
    """Built-in themes first, then the user's (which win on a name clash)."""
    return [paths.shipped("themes"), paths.user_themes_dir()]


def read_theme_file(file: Path) -> dict:
    try:
        return tomllib.loads(file.read_text())
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot be read as TOML ({error})") from None


def colour_problem(key: str, value, is_colour: ColourCheck | None) -> str | None:
    if not isinstance(value, str):
        return f"'{key}' must be a colour in quotes, like \"#9ece6a\" (got {value!r})"
    if is_colour is not None and not is_colour(value):
        return f"'{key}' = \"{value}\" is not a colour (like \"#9ece6a\" or \"rgb(158,206,106)\")"
    return None


def checked(data: dict, is_colour: ColourCheck | None) -> None:
    """A `ConfigError` naming the first wrong key of a theme's data."""
    unknown = set(data) - {"name", "dark", "variables", *COLOR_KEYS}
    if unknown:
        raise ConfigError(f"unknown key '{sorted(unknown)[0]}' (allowed: name, dark, "
                          f"{', '.join(COLOR_KEYS)} and [variables])")
    if not isinstance(data.get("variables", {}), dict):
        raise ConfigError("'variables' must be a table: [variables]")
    problems = [colour_problem(key, data[key], is_colour) for key in COLOR_KEYS if key in data]
    variables = data.get("variables", {})
    problems += [colour_problem(f"variables.{key}", variables[key], is_colour)
                 for key in variables if key.startswith("spec-")]
    problem = next((p for p in problems if p), None)
    if problem:
        raise ConfigError(problem)


def parse_theme(file: Path, is_colour: ColourCheck | None = None) -> ThemeSpec:
    """The theme a file defines; a `ConfigError` naming the file and the wrong key."""
    try:
        data = read_theme_file(file)
        checked(data, is_colour)
    except ConfigError as error:
        raise ConfigError(f"theme file {file}: {error}") from None
    colors = {key: data[key] for key in COLOR_KEYS if key in data}
    variables = token_colours(colors, {k: str(v) for k, v in data.get("variables", {}).items()})
    return ThemeSpec(str(data.get("name", file.stem)), bool(data.get("dark", True)), colors,
                     variables, str(file))


def intended_name(file: Path) -> str:
    """The name a (possibly broken) theme file means to define."""
    try:
        name = tomllib.loads(file.read_text()).get("name")
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
        name = None
    return name if isinstance(name, str) else file.stem


def load_themes(is_colour: ColourCheck | None = None) -> tuple[dict[str, ThemeSpec], list[ThemeProblem]]:
    """Every theme that reads, and a problem for each file skipped."""
    themes: dict[str, ThemeSpec] = {}
    problems: list[ThemeProblem] = []
    for folder in theme_dirs():
        for file in sorted(folder.glob("*.toml")) if folder.is_dir() else ():
            try:
                spec = parse_theme(file, is_colour)
            except ConfigError as error:
                message = str(error).removeprefix(f"theme file {file}: ")
                problems.append(ThemeProblem(file, message, intended_name(file)))
                continue
            themes[spec.name] = spec
    return themes, problems


def available_themes(is_colour: ColourCheck | None = None) -> dict[str, ThemeSpec]:
    return load_themes(is_colour)[0]


def load_theme(name: str | None = None, is_colour: ColourCheck | None = None) -> ThemeSpec:
    themes = available_themes(is_colour)
    name = name or DEFAULT_THEME
    if name not in themes:
        raise ConfigError(f"unknown theme '{name}': available are {', '.join(sorted(themes))} "
                          f"(user themes go in {paths.user_themes_dir()})")
    return themes[name]
