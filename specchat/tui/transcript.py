"""The transcript: user turns, answers drawn token by token in their kind's colour,
rejected drafts as dim struck-through ghosts (a ghost's newline as ↵), notices. A draft of
another tokenizer's token that is not exactly one of the draft's own tokens is underlined.

Every colour comes from the app's theme variables (`spec-accepted`, ...), read
when the text is styled and again whenever the theme changes. Model and saved text is
untrusted, and Textual writes ESC, CSI and OSC sequences and C1 controls through to the
terminal as they are (it drops only BEL, BS, VT, FF and CR): every text drawn here shows its
control characters visibly (specchat/control_chars.py), while `plain_text` (what copy
takes) keeps the exact text. Textual only.
"""

from __future__ import annotations

import inspect
from typing import Callable, Iterable

from textual.color import Color
from textual.content import Content
from textual.content import Span as ContentSpan
from textual.style import Style
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Markdown, Static

from specchat.chat.events import StatsSnapshot, TokenSpan
from specchat.control_chars import visible, visible_ghost
from specchat.token_kinds import TOKEN_KINDS

UNALIGNED_MARK = Style(underline=True)
"""Added to a cross-tokenizer draft's token that is not one of the draft's own tokens
(`TokenSpan.unaligned`)."""
UNALIGNED_LABEL = "underlined: not one draft token"
KIND_LABELS = {"accepted": "accepted draft", "rejected": "rejected draft (ghost)",
               "resampled": "resampled", "bonus": "bonus", "target": "target only",
               "pending": "pending draft"}


def token_styles(variables: dict[str, str]) -> dict[str, Style]:
    """Textual styles per token kind from theme variables."""
    def colour(kind: str) -> Color:
        return Color.parse(variables.get(f"spec-{kind}") or variables.get("foreground", "#ffffff"))

    styles: dict[str, Style] = {kind: Style(foreground=colour(kind)) for kind in TOKEN_KINDS}
    styles["rejected"] = Style(foreground=colour("rejected"), dim=True, strike=True)
    styles["pending"] = Style(foreground=colour("pending"), underline=True, italic=True)
    return styles


def takes_layout(size_updated: Callable[..., bool]) -> bool:
    """Whether Textual's `Widget._size_updated` (a private method) takes `layout`, as it
    does through Textual 8.2.8: a Textual without it keeps its second layout, never a crash."""
    return "layout" in inspect.signature(size_updated).parameters


class LaidOutOnce(Widget):
    """A widget whose height follows its content, laid out once when it grows.

    After every reflow Textual hands each widget its new size through `_size_updated`,
    which sets the widget's `virtual_size`, a reactive that asks for a layout: every new
    row of a streaming answer cost two whole-screen layouts, the second one finding nothing
    to move. None of these widgets scrolls, so nothing reads that reactive's change; the
    size is set without asking again (as Textual does itself for a scrolled-into-view
    widget). tests/test_tui_frames.py counts the layouts."""

    if takes_layout(Widget._size_updated):
        def _size_updated(self, size: Size, virtual_size: Size, container_size: Size,
                          layout: bool = True) -> bool:
            return super()._size_updated(size, virtual_size, container_size, layout=False)


class TokenText(LaidOutOnce):
    """Coloured spans of an answer (one chunk of it), appended a round at a time.

    Keeps the drawn text and its styled spans and renders them as one `Content`,
    so a frame costs one wrap of this chunk and no conversion per token."""

    DEFAULT_CSS = "TokenText { height: auto; }"
    show_ghosts: reactive[bool] = reactive(True)

    def __init__(self, spans: Iterable[TokenSpan] = (), show_ghosts: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.spans: list[TokenSpan] = list(spans)
        self._pending: tuple[TokenSpan, ...] = ()
        self.chunk_ended = False
        """True once a later chunk follows: its closing newline is the break between them."""
        self.set_reactive(TokenText.show_ghosts, show_ghosts)
        self._pieces: list[str] | None = None
        self._styled: list[ContentSpan] = []
        self._length = 0
        self._styles: dict[str, Style] | None = None
        self._content: Content | None = None
        """What `content` made last, kept until the text changes: a frame then wraps it once
        for its height (which Content keeps for the layout) and once to draw it."""

    @property
    def pending(self) -> tuple[TokenSpan, ...]:
        """Drafts still being verified, drawn after the committed text until resolved."""
        return self._pending

    @pending.setter
    def pending(self, drafts: tuple[TokenSpan, ...]) -> None:
        self._pending = drafts
        self._content = None

    @property
    def styles_by_kind(self) -> dict[str, Style]:
        if self._styles is None:
            self._styles = token_styles(self.app.theme_variables)
        return self._styles

    def append(self, spans: Iterable[TokenSpan], pending: tuple[TokenSpan, ...] = ()) -> None:
        """Add committed spans (and ghosts); `pending` drafts are drawn after them until resolved."""
        spans = list(spans)
        self.spans.extend(spans)
        if self._pieces is not None:
            self._draw(spans)
        self.pending = pending  # the text changed: `content` is made again
        self._refresh_grown()

    def resolve_pending(self) -> None:
        self.pending = ()
        self.refresh(layout=True)

    def end_chunk(self) -> None:
        """A later chunk follows: this one's closing newline becomes the break between them."""
        self.chunk_ended = True
        self._content = None
        self.refresh(layout=True)

    def _refresh_grown(self) -> None:
        """Redraw after new text; ask for a new layout (which reflows the whole screen) only
        when the wrapped text no longer takes the rows it has."""
        width, rows = self.content_size
        if width and self._wrapped_rows(width) == rows:
            self.refresh()
        else:
            self.refresh(layout=True)

    def _wrapped_rows(self, width: int) -> int:
        """Rows the text takes at `width` (the widget's styles handed over as Textual's own
        Widget.get_content_height hands them, which its annotation does not foresee)."""
        return self.render().get_height(self.styles, width)  # type: ignore[arg-type]

    def restyle(self) -> None:
        """Theme changed: recolour everything."""
        self._styles = None
        self._draw_again()
        self.refresh()

    def watch_show_ghosts(self) -> None:
        self._draw_again()
        self.refresh(layout=True)

    def _draw_again(self) -> None:
        """Forget the drawn text and its content: the next render draws every span."""
        self._pieces = None
        self._content = None

    def _draw(self, spans: Iterable[TokenSpan]) -> None:
        styles, pieces = self.styles_by_kind, self._pieces
        if pieces is None:
            return  # nothing drawn yet: the next render draws every span
        for span in spans:
            if (span.kind == "rejected" and not self.show_ghosts) or not span.text:
                continue
            text = visible_ghost(span.text) if span.kind == "rejected" else visible(span.text)
            end = self._length + len(text)
            pieces.append(text)
            style = styles.get(span.kind, styles["target"])
            if span.unaligned:
                style = style + UNALIGNED_MARK
            self._styled.append(ContentSpan(self._length, end, style))
            self._length = end

    def plain_text(self) -> str:
        """The committed text: never the ghosts."""
        return "".join(s.text for s in self.spans if s.kind != "rejected")

    def content(self) -> Content:
        """What this chunk draws: committed spans, ghosts if shown, pending drafts."""
        if self._content is None:
            self._content = self._make_content()
        return self._content

    def _make_content(self) -> Content:
        if self._pieces is None:
            self._pieces, self._styled, self._length = [], [], 0
            self._draw(self.spans)
        pieces, styled, length = list(self._pieces), list(self._styled), self._length
        pending = self.styles_by_kind["pending"]
        for span in self.pending:
            text = visible(span.text)
            pieces.append(text)
            styled.append(ContentSpan(length, length + len(text), pending))
            length += len(text)
        text = "".join(pieces)
        if self.chunk_ended and text.endswith("\n"):
            text = text[:-1]
        return Content(text, styled)

    def render(self) -> Content:
        return self.content()


CHUNK_SPANS = 60
"""A new chunk starts after a newline once a chunk holds this many spans, so a frame
re-renders only the paragraph still growing, not the whole answer (300 re-wrapped a
screenful ten times a second beside the model on 2 cores: docs/choices.md)."""


def split_into_chunks(held: int, spans: Iterable[TokenSpan]) -> list[list[TokenSpan]]:
    """`spans` cut where chunks end: the first part continues a chunk that already holds
    `held` spans, each later part starts a new chunk (the last part may be empty: a chunk
    just ended). A chunk ends at the first committed span ending in a newline once it holds
    `CHUNK_SPANS`, wherever that span falls in a batch of rounds: never at a rejected
    draft's newline, which is not in the text (the chunks stack, so their break is a line
    break)."""
    parts: list[list[TokenSpan]] = [[]]
    count = held
    for span in spans:
        parts[-1].append(span)
        count += 1
        if count >= CHUNK_SPANS and span.kind != "rejected" and span.text.endswith("\n"):
            parts.append([])
            count = 0
    return parts


class TokenFlow(LaidOutOnce, Vertical):
    """An answer's tokens as a column of TokenText chunks split at newlines."""

    DEFAULT_CSS = "TokenFlow { height: auto; }"

    def __init__(self, spans: Iterable[TokenSpan] = (), show_ghosts: bool = True):
        super().__init__()
        self.show_ghosts = show_ghosts
        self.chunks = [TokenText(part, show_ghosts=show_ghosts)
                       for part in split_into_chunks(0, spans)]
        for chunk in self.chunks[:-1]:
            chunk.chunk_ended = True

    def compose(self) -> ComposeResult:
        yield from self.chunks

    @property
    def spans(self) -> list[TokenSpan]:
        return [span for chunk in self.chunks for span in chunk.spans]

    @property
    def pending(self) -> tuple[TokenSpan, ...]:
        return self.chunks[-1].pending

    def append(self, spans: Iterable[TokenSpan], pending: tuple[TokenSpan, ...] = ()) -> None:
        """Add a batch of rounds' spans, starting new chunks where `split_into_chunks` ends
        them; `pending` drafts go after the last."""
        first, *later = split_into_chunks(len(self.chunks[-1].spans), spans)
        self.chunks[-1].append(first, () if later else pending)
        for part in later:
            self.chunks[-1].end_chunk()
            chunk = TokenText(part, show_ghosts=self.show_ghosts)
            self.chunks.append(chunk)
            self.mount(chunk)
        if later:
            self.chunks[-1].pending = pending

    def resolve_pending(self) -> None:
        self.chunks[-1].resolve_pending()

    def set_ghosts(self, shown: bool) -> None:
        self.show_ghosts = shown
        for chunk in self.chunks:
            chunk.show_ghosts = shown

    def restyle(self) -> None:
        for chunk in self.chunks:
            chunk.restyle()

    def plain_text(self) -> str:
        return "".join(chunk.plain_text() for chunk in self.chunks)

    def drawn(self) -> list[tuple[str, Style | str]]:
        """(text, style) of every styled run on screen, all chunks in order."""
        runs: list[tuple[str, Style | str]] = []
        for chunk in self.chunks:
            content = chunk.content()
            runs += [(content.plain[s.start:s.end], s.style) for s in content.spans]
        return runs

    def drawn_text(self) -> str:
        return "".join(text for text, _ in self.drawn())


class UserTurn(Static):
    """A message the user sent."""

    def __init__(self, text: str):
        super().__init__(visible(text), markup=False, classes="user-turn")


class Notice(Static):
    """A line of information in the transcript (context trimmed, race result...)."""

    def __init__(self, text: str, kind: str = "info"):
        super().__init__(visible(text), markup=False, classes=f"notice -{kind}")


class AnswerView(LaidOutOnce, Vertical):
    """One answer: a header, the coloured tokens (or its Markdown), and a status line."""

    DEFAULT_CSS = "AnswerView { height: auto; }"

    def __init__(self, label: str, show_ghosts: bool = True, spans: Iterable[TokenSpan] = ()):
        super().__init__(classes="answer")
        self.label = label
        self.tokens = TokenFlow(spans, show_ghosts)
        self.status = Static("", classes="answer-status", markup=False)
        self.finished = False
        self.stats: StatsSnapshot | None = None
        """The figures of a finished answer (what its status line and the charts show)."""
        self.markdown_shown = False
        self._markdown: Markdown | None = None

    def compose(self) -> ComposeResult:
        yield Static(visible(self.label), classes="answer-label", markup=False)
        yield self.tokens
        yield self.status

    @property
    def text(self) -> str:
        return self.tokens.plain_text()

    def finish(self, stats: StatsSnapshot | None, status: str, error: str | None = None) -> None:
        self.finished = True
        self.stats = stats
        self.tokens.resolve_pending()
        self.status.update(visible(summary_line(stats, status, error)))
        self.set_class(status != "done", "-incomplete")

    def toggle_markdown(self) -> bool:
        """Switch between coloured tokens and rendered Markdown; True if Markdown is shown."""
        if self._markdown is None:
            self._markdown = Markdown(visible(self.text), classes="answer-markdown")
            self.mount(self._markdown, after=self.tokens)
        self.markdown_shown = not self.markdown_shown
        self._markdown.display = self.markdown_shown
        self.tokens.display = not self.markdown_shown
        return self.markdown_shown


STATUS_OF_STOP = {"stopped": "stopped", "failed": "error", "context_full": "context_full"}
"""How an answer that ended for a reason is marked and saved; "done" for the others."""


def answer_status(stop_reason: str) -> str:
    return STATUS_OF_STOP.get(stop_reason, "done")


def summary_line(stats: StatsSnapshot | None, status: str, error: str | None = None) -> str:
    parts = []
    if stats is not None and stats.tokens:
        parts.append(f"{stats.tokens} tokens")
        if stats.tokens_per_s:
            parts.append(f"{stats.tokens_per_s:.1f} tok/s")
        if stats.acceptance_rate is not None:
            parts.append(f"acceptance {stats.acceptance_rate:.0%}")
        if stats.mean_acceptance_length:
            parts.append(f"τ {stats.mean_acceptance_length:.2f}")
    marks = {"stopped": "■ stopped", "error": "✗ failed", "interrupted": "✗ interrupted (app closed)",
             "context_full": "⚠ context full: the model has no room for more; start a new chat "
                             "(Ctrl+N) to go on"}
    if status in marks:
        parts.append(marks[status])
    if error:
        parts.append(error)
    return " · ".join(parts)
