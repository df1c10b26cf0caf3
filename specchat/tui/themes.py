"""Themes and remembered preferences for the TUI.

Maps the theme files (`specchat.theme_files.ThemeSpec`: built-ins in `themes/`,
user themes in the config directory) onto `textual.theme.Theme`, with the token
colours as theme variables. Preferences (theme, slow-motion delay, ghosts) live
in a small JSON file in the config directory.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from textual.theme import Theme

from specchat import paths
from specchat.theme_files import DEFAULT_THEME, ThemeSpec, available_themes

TOKEN_FALLBACKS = {"spec-accepted": "#9ece6a", "spec-rejected": "#f7768e",
                   "spec-resampled": "#e0af68", "spec-bonus": "#7dcfff",
                   "spec-target": "#c0caf5", "spec-pending": "#bb9af7"}


def to_textual(spec: ThemeSpec) -> Theme:
    """A Textual theme whose variables include spec-accepted, spec-rejected, ..."""
    variables = dict(spec.variables)
    variables.setdefault("spec-pending", spec.colors.get("secondary", TOKEN_FALLBACKS["spec-pending"]))
    return Theme(name=spec.name, dark=spec.dark, variables=variables, **spec.colors)


def load_textual_themes() -> dict[str, Theme]:
    return {name: to_textual(spec) for name, spec in available_themes().items()}


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
