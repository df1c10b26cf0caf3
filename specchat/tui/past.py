"""The transcript's far past, folded: the first widgets of a long conversation that lie more
than a screen above the view are hidden behind one blank widget of their height, so a
frame of a long conversation costs what one of a short conversation does.

Why: Textual places every widget of a scrolling container at each layout, and a streaming
answer asks for a layout at each new line. A conversation of 40 answers held about 300
widgets, and the layout took 5 times as long as for the first answer (docs/benchmarks.md,
"UI"). Folded widgets stay in the DOM (queries, charts and history see them all) with
`display: none`; the `Fold` in front of them keeps the scrollbar and every row below where
they were. The fold opens, all of it, when the view comes within a screen of it, when the
width changes, and before anything changes the heights of hidden widgets (`open`).

Only ever a prefix of the container's children is folded, and never from a widget the
caller pins (the answer still streaming, the last answer) on. Textual only; knows nothing
of answers or turns.
"""

from __future__ import annotations

from typing import Callable, Collection, Sequence

from textual.containers import ScrollableContainer
from textual.widget import Widget


class Fold(Widget):
    """Blank rows standing in for the folded widgets (no margin: its height is exactly
    the rows from the container's top to the last folded widget's bottom)."""

    DEFAULT_CSS = "Fold { height: 0; margin: 0; padding: 0; border: none; }"


def count_foldable(bottoms: Sequence[int], limit: int) -> int:
    """How many leading widgets (their bottom rows, in order) end at or above `limit`."""
    count = 0
    for bottom in bottoms:
        if bottom > limit:
            break
        count += 1
    return count


class PastFold:
    """Folds and opens the far past of one scrolling container."""

    def __init__(self, container: ScrollableContainer,
                 pinned: Callable[[], Collection[Widget]]) -> None:
        self.container = container
        self.pinned = pinned
        """Widgets never folded, nor anything after them."""
        self.fold: Fold | None = None
        self.folded: list[Widget] = []
        self.rows = 0
        """The fold's height: from the container's top to the last folded widget's bottom."""
        self.width = 0
        """The container's width when the fold closed (a new width wraps to new heights)."""

    def _kept_from(self, scroll_y: float) -> int:
        """The first row kept laid out: a screen above the view's top (the rows above it may fold)."""
        return round(scroll_y) - self.container.scrollable_content_region.height

    def _unfolded(self) -> list[Widget]:
        """The children after the fold that are shown, up to the first pinned one."""
        pinned, folded, shown = self.pinned(), set(self.folded), []
        for child in self.container.children:
            if child is self.fold or child in folded or not child.display:
                continue
            if child in pinned:
                break
            shown.append(child)
        return shown

    async def close(self) -> None:
        """Fold every widget that ends more than a screen above the view."""
        container = self.container
        if not container.is_mounted or not container.children:
            return
        if self.fold is None or self.fold.parent is not container:
            self.fold, self.folded = Fold(), []
            await container.mount(self.fold, before=0)
        candidates = self._unfolded()
        count = count_foldable([child.virtual_region.bottom for child in candidates],
                               self._kept_from(container.scroll_y))
        if not count:
            return
        self.rows = candidates[count - 1].virtual_region.bottom
        for child in candidates[:count]:
            child.display = False
        self.folded += candidates[:count]
        self.fold.styles.height = self.rows
        self.width = container.size.width

    def open(self) -> None:
        """Show every folded widget again (the fold keeps no rows)."""
        if not self.folded or self.fold is None:
            return
        for child in self.folded:
            child.display = True
        self.folded, self.rows = [], 0
        self.fold.styles.height = 0

    def scrolled(self, scroll_y: float) -> None:
        """Open before the view comes within a screen of the folded rows."""
        if self.folded and self._kept_from(scroll_y) < self.rows:
            self.open()

    def resized(self) -> None:
        if self.folded and self.container.size.width != self.width:
            self.open()

    def forget(self) -> None:
        """The container's children were removed (a new chat, a reopened conversation)."""
        self.fold, self.folded, self.rows = None, [], 0
