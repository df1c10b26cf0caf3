"""Textual's rules for a theme's values: the one judge of whether a theme file draws.

The chat and `run` both check theme files with `TextualRules` (theme_files.ThemeRules),
so a file one of them accepts the other accepts too: a colour is what Textual's colour
parser reads (`run` paints it with rich through `rich_colour`, Textual's own conversion),
and one of Textual's variables takes what Textual's CSS takes where its own default value
goes (a colour, a text colour like "auto 87%", or a text style like "bold").

Knows Textual's colour parser and CSS; nothing of files or of the chat.
"""

from __future__ import annotations

from functools import lru_cache

from textual.color import Color, ColorParseError

COLOUR_EXAMPLE = 'like "#9ece6a", "rgb(158,206,106)", "hsl(90,50%,61%)" or "red"'
KIND_EXAMPLES = {"text-style": 'a text style (like "bold", "underline" or "none")',
                 "color": 'a text colour (like "#c0caf5" or "auto 87%")',
                 "background": f"a colour ({COLOUR_EXAMPLE})"}
PROPERTIES = ("text-style", "background", "color")


def css_parses(prop: str, value: str) -> bool:
    """Whether Textual's CSS takes `value` for the property (one declaration, nothing more)."""
    from textual.css.styles import Styles

    if any(mark in value for mark in ";{}$\n"):
        return False
    try:
        Styles.parse(f"{prop}: {value};", ("theme", ""))
    except Exception:  # Textual's CSS errors have no common base; any of them is a "no"
        return False
    return True


@lru_cache(maxsize=1)
def textual_defaults() -> dict[str, str]:
    """Textual's own theme variables with their default values."""
    from textual.design import ColorSystem

    return ColorSystem(primary="#0178D4").generate()


@lru_cache(maxsize=None)
def variable_kinds(name: str) -> tuple[str, ...]:
    """The properties a value of Textual's variable must read as: those its default reads as
    (a text style; a colour, which must also do as a background; or a text colour only)."""
    default = textual_defaults()[name]
    if css_parses("text-style", default) and not css_parses("color", default):
        return ("text-style",)
    return ("color", "background") if css_parses("background", default) else ("color",)


class TextualRules:
    """theme_files.ThemeRules by Textual's colour parser and CSS."""

    @property
    def variables(self) -> frozenset[str]:
        return frozenset(textual_defaults())

    def colour_problem(self, text: str) -> str | None:
        try:
            Color.parse(text)
        except ColorParseError:
            return f"is not a colour ({COLOUR_EXAMPLE})"
        return None

    def variable_problem(self, name: str, value: str) -> str | None:
        wrong = [prop for prop in variable_kinds(name) if not css_parses(prop, value)]
        return f"is not {KIND_EXAMPLES[wrong[-1]]}" if wrong else None


def rich_colour(text: str) -> str:
    """rich's name for a colour Textual reads (its ANSI colours as rich's standard ones)."""
    return Color.parse(text).rich_color.name
