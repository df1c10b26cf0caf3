"""Command-palette entries (Ctrl+P): decoding knobs, pacing, themes, pairs, exports
and the app's actions (those of the key table, specchat.tui.keys), each a title, a
help line and a callback on the part of the app that owns the setting.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Iterator, Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from specchat.chat.service import K_MAX
from specchat.tui.keys import palette_actions

K_CHOICES = range(0, K_MAX + 1)
"""Every fixed k the config file and -k allow (engine/params.py's K_MAX)."""
TEMPERATURES = (0.0, 0.2, 0.5, 0.7, 1.0)
SLOW_DELAYS_MS = (100, 250, 500, 1000, 2000)


class PaletteTarget(Protocol):
    """What the palette drives: the app's themes and actions, and its parts (settings,
    conversation, pair, history)."""

    spec_themes: dict
    pairs: list[tuple[str, str]]
    settings: Any
    transcript: Any
    pacing: Any
    pair: Any
    history: Any

    def set_theme(self, name: str) -> None: ...
    def run_action(self, action: str) -> object: ...


def palette_entries(app: PaletteTarget) -> Iterator[tuple[str, str, Callable[[], object]]]:
    """(title, help, callback) for every palette command."""
    settings = app.settings
    for k in K_CHOICES:
        yield f"Set k = {k}", "draft tokens per round, from the next round", partial(settings.set_k, k)
    for t in TEMPERATURES:
        yield (f"Set temperature = {t:g}", "sampling temperature, from the next round",
               partial(settings.set_temperature, t))
    for ms in SLOW_DELAYS_MS:
        yield (f"Slow motion delay = {ms} ms", "and turn slow motion on",
               partial(app.pacing.set_slow_motion, ms))
    for name in sorted(app.spec_themes):
        yield f"Theme: {name}", "switch colour theme (remembered)", partial(app.set_theme, name)
    for name, about in app.pairs:
        yield f"Switch pair: {name}", about or "load in the background", partial(app.pair.switch, name)
    for fmt in ("markdown", "json", "html"):
        yield (f"Export conversation as {fmt.upper() if fmt != 'markdown' else 'Markdown'}",
               "write it to the data folder", partial(app.history.export_current, fmt))
    yield ("Remeasure the baseline", "time target-only speed again: the speedup's baseline",
           app.pair.remeasure_baseline)
    for title, about, action in palette_actions():
        yield title, about, partial(app.run_action, action)


class SpecchatCommands(Provider):
    """The palette's specchat section."""

    @property
    def target(self) -> PaletteTarget:
        """The app the palette drives (Textual types it as any App)."""
        return cast(PaletteTarget, self.app)

    async def discover(self) -> Hits:
        for title, about, callback in palette_entries(self.target):
            yield DiscoveryHit(title, callback, help=about)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, about, callback in palette_entries(self.target):
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=about)
