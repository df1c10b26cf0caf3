"""Themes and remembered preferences for the TUI.

Maps the theme files (`specchat.theme_files.ThemeSpec`: built-ins in `themes/`,
user themes in the config directory) onto `textual.theme.Theme`, with the token
colours as theme variables, and offers Textual's own themes beside them (their token
colours derived from their success / error / warning / accent / foreground colours).
Theme files are checked by Textual's rules (tui/theme_rules.py, which `run` uses too); a
broken file is skipped and named. Preferences (theme, slow-motion delay, ghosts) live in a
small JSON file in the config directory.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from textual.theme import BUILTIN_THEMES, Theme

from specchat import paths
from specchat.errors import ConfigError
from specchat.theme_files import (COLOR_KEYS, DEFAULT_THEME, ThemeProblem, ThemeSpec, load_themes,
                                  token_colours)
from specchat.tui.theme_rules import TextualRules


def to_textual(spec: ThemeSpec) -> Theme:
    """A Textual theme whose variables include spec-accepted, spec-rejected, ..."""
    return Theme(name=spec.name, dark=spec.dark, variables=dict(spec.variables), **spec.colors)


def drawable(theme: Theme) -> Theme:
    """The theme, once Textual has made its colour system from it (which raises if it cannot)."""
    theme.to_color_system().generate()
    return theme


def with_token_colours(theme: Theme) -> Theme:
    """One of Textual's own themes, its token colours derived from its own colours."""
    colors = {key: getattr(theme, key, None) for key in COLOR_KEYS}
    return dataclasses.replace(theme, variables=token_colours(colors, dict(theme.variables)))


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
    themes, problems = load_textual_themes()
    if name in themes or name in {problem.name for problem in problems}:
        return
    raise ConfigError(f"unknown theme '{name}': available are {', '.join(sorted(themes))} "
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
