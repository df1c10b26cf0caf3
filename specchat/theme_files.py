"""Theme files: one TOML per theme, built-ins shipped in `themes/`, user themes in
the config directory (a user theme of the same name wins).

Pure data (tomllib): the TUI maps a `ThemeSpec` onto `textual.theme.Theme`, the CLI
reads the token colours for ANSI output. Token colours are the theme variables
`spec-accepted`, `spec-rejected`, `spec-resampled`, `spec-bonus`, `spec-target`; a theme
that leaves one out gets it from its own success / error / warning / accent / foreground
colours (`token_colours`), so Textual's own themes have them too.

A broken file never stops anything: `load_themes` skips it and says which file and key
are wrong (`ThemeProblem`), and the caller shows that where it stays on screen; a variable
the renderer does not know is named and ignored. This module checks a file's shape (its
keys, the types of its values, the token colours' names); whether a value draws is decided
by one judge, the renderer's rules handed in (`ThemeRules`: Textual's, tui/theme_rules.py,
for the chat and `run` alike), since this module imports no renderer.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Protocol

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

TOP_KEYS = ("name", "dark", "variables", *COLOR_KEYS)


class ThemeRules(Protocol):
    """What the renderer that draws a theme accepts: the one judge of a theme's values."""

    @property
    def variables(self) -> frozenset[str]:
        """The renderer's own variable names (another name is named and ignored)."""

    def colour_problem(self, text: str) -> str | None:
        """What is wrong with a text as a colour (a theme colour, a token colour); None if
        it is one."""

    def variable_problem(self, name: str, value: str) -> str | None:
        """What is wrong with a value for one of the renderer's own variables; None if it draws."""


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
    skipped: bool = True
    """False for a warning: the theme is used without the part named."""

    def __str__(self) -> str:
        return f"theme file {self.file}: {self.message}; {'skipped it' if self.skipped else 'ignored it'}"


def token_colours(colors: Mapping[str, str | None], variables: dict[str, str]) -> dict[str, str]:
    """The theme's variables with every token colour set: its own, else derived from its
    colours, else specchat-dark's."""
    derived = {name: colors.get(source) or DEFAULT_TOKEN_COLOURS[name]
               for name, source in TOKEN_SOURCES.items()}
    return {**derived, **variables}


def page_colours(colors: Mapping[str, str | None], variables: dict[str, str]) -> dict[str, str]:
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


def typed_values(data: dict) -> dict[str, object]:
    """A theme's values that must be text in quotes, by key ("primary", "variables.x")."""
    values = {key: data[key] for key in ("name", *COLOR_KEYS) if key in data}
    return values | {f"variables.{key}": value for key, value in data.get("variables", {}).items()}


def shape_problem(data: dict) -> str | None:
    """The first key of a theme's data that is unknown or of the wrong type, said as a fix."""
    unknown = set(data) - set(TOP_KEYS)
    if unknown:
        return (f"unknown key '{sorted(unknown)[0]}' (allowed: name, dark, "
                f"{', '.join(COLOR_KEYS)} and [variables])")
    if "primary" not in data:
        return "'primary' is missing: every theme needs its main colour, like primary = \"#7aa2f7\""
    if not isinstance(data.get("variables", {}), dict):
        return "'variables' must be a table: [variables]"
    if not isinstance(data.get("dark", True), bool):
        return f"'dark' must be true or false, without quotes (a boolean; got {data['dark']!r})"
    for key, value in typed_values(data).items():
        if not isinstance(value, str):
            return f"'{key}' must be text in quotes, like \"#9ece6a\" (got {value!r})"
    tokens = sorted(set(k for k in data.get("variables", {}) if k.startswith("spec-")) - set(TOKEN_SOURCES))
    if tokens:
        return f"unknown token colour 'variables.{tokens[0]}' (known: {', '.join(TOKEN_SOURCES)})"
    return None


def value_problems(data: dict, rules: ThemeRules) -> tuple[list[str], list[str]]:
    """(errors, warnings) of a well-shaped theme's values, by the renderer's rules: colours
    and token colours must be colours, the renderer's own variables take what it takes, and
    another variable is named and ignored."""
    variables = data.get("variables", {})
    own = {k: v for k, v in variables.items() if not k.startswith("spec-")}
    colours = {key: data[key] for key in COLOR_KEYS if key in data}
    colours |= {f"variables.{k}": v for k, v in variables.items() if k not in own}
    verdicts = [(key, value, rules.colour_problem(value)) for key, value in colours.items()]
    verdicts += [(f"variables.{k}", v, rules.variable_problem(k, v))
                 for k, v in own.items() if k in rules.variables]
    errors = [f"'{key}' = \"{value}\" {problem}" for key, value, problem in verdicts if problem]
    warnings = [f"unknown variable 'variables.{k}' (the chat has no such variable)"
                for k in own if k not in rules.variables]
    return errors, warnings


def checked(data: dict, rules: ThemeRules | None) -> list[str]:
    """A theme's warnings; a `ConfigError` naming the first wrong key."""
    problem = shape_problem(data)
    errors, warnings = value_problems(data, rules) if rules and not problem else ([], [])
    if problem or errors:
        raise ConfigError(problem or errors[0])
    return warnings


def parse_theme(file: Path, rules: ThemeRules | None = None) -> tuple[ThemeSpec, list[str]]:
    """The theme a file defines and its warnings; a `ConfigError` naming the file and the
    wrong key. Without `rules` only the file's shape is checked."""
    try:
        data = read_theme_file(file)
        warnings = checked(data, rules)
    except ConfigError as error:
        raise ConfigError(f"theme file {file}: {error}") from None
    colors = {key: data[key] for key in COLOR_KEYS if key in data}
    variables = token_colours(colors, dict(data.get("variables", {})))
    return ThemeSpec(data.get("name", file.stem), data.get("dark", True), colors, variables,
                     str(file)), warnings


def intended_name(file: Path) -> str:
    """The name a (possibly broken) theme file means to define."""
    try:
        name = tomllib.loads(file.read_text()).get("name")
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
        name = None
    return name if isinstance(name, str) else file.stem


def load_themes(rules: ThemeRules | None = None) -> tuple[dict[str, ThemeSpec], list[ThemeProblem]]:
    """Every theme that reads, and a problem for each file skipped (and each warning)."""
    themes: dict[str, ThemeSpec] = {}
    problems: list[ThemeProblem] = []
    for folder in theme_dirs():
        for file in sorted(folder.glob("*.toml")) if folder.is_dir() else ():
            try:
                spec, warnings = parse_theme(file, rules)
            except ConfigError as error:
                message = str(error).removeprefix(f"theme file {file}: ")
                problems.append(ThemeProblem(file, message, intended_name(file)))
                continue
            problems += [ThemeProblem(file, warning, spec.name, skipped=False) for warning in warnings]
            themes[spec.name] = spec
    return themes, problems


def available_themes(rules: ThemeRules | None = None) -> dict[str, ThemeSpec]:
    return load_themes(rules)[0]


def load_theme(name: str | None = None, rules: ThemeRules | None = None) -> ThemeSpec:
    themes = available_themes(rules)
    name = name or DEFAULT_THEME
    if name not in themes:
        raise ConfigError(f"unknown theme '{name}': available are {', '.join(sorted(themes))} "
                          f"(user themes go in {paths.user_themes_dir()})")
    return themes[name]
