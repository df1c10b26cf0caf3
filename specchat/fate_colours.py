"""Token colours a theme does not name, chosen so that text stays readable and the four
fates stay apart: from candidate colours (the theme's own, best first), take the first
that differs from the fates already chosen, made readable on the background.

Readable means a WCAG contrast ratio of at least `CONTRAST_FLOOR` against the background;
a candidate short of it is moved towards white (on a dark background) or black (on a
light one) until it reads. Colours are "#rrggbb" text; terminal palette colours
("ansi_green") have no known value, so they are taken as they are and kept apart by
name. Pure arithmetic: no textual, no rich (the caller says which colours are candidates).
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

from specchat.token_kinds import FATES

CONTRAST_FLOOR = 4.5
"""WCAG AA for body text: every derived token colour reads at least this well."""
DISTINCT_MIN = 30.0
"""The least CIE76 ΔE (distance in CIE L*a*b*) between two fates' colours: closer, two
text colours read as one (a lighter orange is still orange)."""
HEX = re.compile(r"^#[0-9a-fA-F]{6}$")


def rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def linear(channel: int) -> float:
    """An sRGB channel (0..255) as linear light (0..1)."""
    c = channel / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def luminance(colour: str) -> float:
    """WCAG relative luminance of a "#rrggbb" colour."""
    r, g, b = (linear(c) for c in rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(colour: str, background: str) -> float:
    """WCAG contrast ratio, 1 (none) to 21 (black on white)."""
    high, low = sorted((luminance(colour), luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def mix(colour: str, towards: str, share: float) -> str:
    return "#" + "".join(f"{round(a + (b - a) * share):02x}"
                         for a, b in zip(rgb(colour), rgb(towards)))


MIX_STEPS = 20
"""How finely `readable` shifts a colour towards white or black: 5% a step."""


def readable(colour: str, background: str, floor: float = CONTRAST_FLOOR) -> str:
    """`colour`, or the least shift of it towards white or black that reads on `background`."""
    if not (HEX.match(colour) and HEX.match(background)) or contrast(colour, background) >= floor:
        return colour
    towards = "#ffffff" if luminance(background) < 0.18 else "#000000"
    for step in range(1, MIX_STEPS + 1):
        shifted = mix(colour, towards, step / MIX_STEPS)
        if contrast(shifted, background) >= floor:
            return shifted
    return towards


def lab(colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of a "#rrggbb" colour."""
    r, g, b = (linear(c) for c in rgb(colour))
    xyz = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
           (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)
    fx, fy, fz = (v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def apart(a: str, b: str) -> bool:
    """Whether two colours read as two (ΔE at least `DISTINCT_MIN`). Palette colours by
    name, a bright one the same as its plain one."""
    if not (HEX.match(a) and HEX.match(b)):
        return a.lower().replace("bright_", "") != b.lower().replace("bright_", "")
    return sum((p - q) ** 2 for p, q in zip(lab(a), lab(b))) ** 0.5 >= DISTINCT_MIN


def pick(candidates: Iterable[str | None], background: str, taken: Sequence[str]) -> str | None:
    """The first candidate, made readable, that differs from every colour `taken`; None
    if each one is too close to one taken."""
    for candidate in dict.fromkeys(c for c in candidates if c):
        colour = readable(candidate, background)
        if all(apart(colour, other) for other in taken):
            return colour
    return None


def derived_token_colours(candidates: Mapping[str, Sequence[str | None]], background: str,
                          given: dict[str, str]) -> dict[str, str]:
    """Every `spec-*` variable in `candidates`: the given one where the theme names it,
    else picked from its candidates (the fates kept apart from one another)."""
    chosen: dict[str, str] = {}
    for name, options in candidates.items():
        fate = name.removeprefix("spec-") in FATES
        taken = [chosen[f"spec-{kind}"] for kind in FATES if f"spec-{kind}" in chosen] if fate else []
        chosen[name] = given.get(name) or pick(options, background, taken) or readable(
            next(c for c in options if c), background)
    return chosen
