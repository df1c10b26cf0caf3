"""Incremental detokenizing: the text each new token adds, as it arrives.

Decoding a token on its own garbles multi-byte characters (split across tokens)
and, for SentencePiece vocabularies, leading spaces. So each token's text is the
difference between decoding a short window that ends with it and the same window
without it. Where that delta ends in an incomplete UTF-8 sequence (U+FFFD), only the
incomplete end is held back, for the token that completes the character; the whole
characters before it are given out at once, so a stop between two tokens never holds
back a character that was already complete. The window starts a few tokens into the
prompt so the first answer token decodes in context.

Works with any tokenizer that has `decode(ids, skip_special_tokens=...)`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

REPLACEMENT = "\ufffd"
CONTEXT_TOKENS = 6


@dataclass(frozen=True)
class DetokState:
    """Position of the decoding window over the token ids."""

    ids: tuple[int, ...]
    prefix_offset: int
    read_offset: int
    shown: int = 0
    """Characters past `read_offset`'s text already given out while an incomplete
    character is held back."""


class IncrementalDetokenizer:
    """Turns a stream of token ids into per-token text deltas."""

    def __init__(self, tokenizer: Any, context: list[int] | tuple[int, ...] = ()):
        self.tokenizer = tokenizer
        ids = tuple(context[-CONTEXT_TOKENS:])
        self.state = DetokState(ids, 0, len(ids))

    def _decode(self, ids: tuple[int, ...]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    def _step(self, state: DetokState, token: int) -> tuple[DetokState, str]:
        ids = state.ids + (token,)
        before = self._decode(ids[state.prefix_offset:state.read_offset])
        after = self._decode(ids[state.prefix_offset:])
        start = len(before) + state.shown
        if len(after) > len(before) and not after.endswith(REPLACEMENT):
            return DetokState(ids, state.read_offset, len(ids)), after[start:]
        complete = max(start, len(after.rstrip(REPLACEMENT)))
        return replace(state, ids=ids, shown=complete - len(before)), after[start:complete]

    def push(self, token: int) -> str:
        """Commit a token; return the text it adds (may be "" while a character is incomplete)."""
        self.state, text = self._step(self.state, token)
        return text

    def peek(self, tokens: list[int]) -> list[str]:
        """Texts the tokens would add after the committed ones, without committing them."""
        state, texts = self.state, []
        for token in tokens:
            state, text = self._step(state, token)
            texts.append(text)
        if texts:
            texts[-1] += self._pending_text(state)
        return texts

    def _pending_text(self, state: DetokState) -> str:
        held = self._decode(state.ids[state.prefix_offset:])
        before = self._decode(state.ids[state.prefix_offset:state.read_offset])
        return held[len(before) + state.shown:]

    def flush(self) -> str:
        """Text still held back at the end of the answer (an incomplete character)."""
        text = self._pending_text(self.state)
        self.state = replace(self.state, read_offset=len(self.state.ids), shown=0)
        return text
