"""Theme files: one TOML per theme, built-ins shipped in `themes/`, user themes in
the config directory (a user theme of the same name wins).

Pure data (tomllib): the TUI maps a `ThemeSpec` onto `textual.theme.Theme`, the CLI
reads the token colours for ANSI output. Token colours are the theme variables
`spec-accepted`, `spec-rejected`, `spec-resampled`, `spec-bonus`, `spec-target`.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from specchat import paths
from specchat.errors import ConfigError

DEFAULT_THEME = "specchat-dark"
TOKEN_VARIABLES = ("spec-accepted", "spec-rejected", "spec-resampled", "spec-bonus", "spec-target")
COLOR_KEYS = ("primary", "secondary", "accent", "foreground", "background", "surface", "panel",
              "success", "warning", "error", "boost")


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


def theme_dirs() -> list[Path]:
    """Built-in themes first, then the user's (which win on a name clash)."""
    return [paths.shipped("themes"), paths.user_themes_dir()]


def parse_theme(file: Path) -> ThemeSpec:
    try:
        data = tomllib.loads(file.read_text())
    except (tomllib.TOMLDecodeError, OSError) as error:
        raise ConfigError(f"theme file {file}: cannot be read as TOML ({error})") from None
    unknown = set(data) - {"name", "dark", "variables", *COLOR_KEYS}
    if unknown:
        raise ConfigError(f"theme file {file}: unknown key '{sorted(unknown)[0]}'")
    variables = dict(data.get("variables", {}))
    missing = [v for v in TOKEN_VARIABLES if v not in variables]
    if missing:
        raise ConfigError(f"theme file {file}: [variables] lacks '{missing[0]}' (every theme "
                          f"sets {', '.join(TOKEN_VARIABLES)})")
    colors = {key: data[key] for key in COLOR_KEYS if key in data}
    return ThemeSpec(str(data.get("name", file.stem)), bool(data.get("dark", True)), colors,
                     variables, str(file))


def available_themes() -> dict[str, ThemeSpec]:
    themes: dict[str, ThemeSpec] = {}
    for folder in theme_dirs():
        if folder.is_dir():
            for file in sorted(folder.glob("*.toml")):
                spec = parse_theme(file)
                themes[spec.name] = spec
    return themes


def load_theme(name: str | None = None) -> ThemeSpec:
    themes = available_themes()
    name = name or DEFAULT_THEME
    if name not in themes:
        raise ConfigError(f"unknown theme '{name}': available are {', '.join(sorted(themes))} "
                          f"(user themes go in {paths.user_themes_dir()})")
    return themes[name]
