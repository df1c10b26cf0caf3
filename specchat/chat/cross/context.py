"""The draft model's own tokens for the text the target has committed.

The target commits its tokens; a draft of another tokenizer reads the same text in its own.
`DraftContext.sync`, before every proposal:
1. reads the newly committed target tokens' bytes into the committed text;
2. keeps the longest run of the draft's tokens (fed to its cache, or waiting to be) that
   spells a prefix of that text: the drafts the target kept still spell it;
3. backs off to the start of the word that run ends in (at most `WORD_BACKOFF` tokens), so
   a word the target finished differently is tokenized whole, as the draft would read it;
4. tokenizes the rest with the draft's tokenizer (a character the target's byte tokens
   left incomplete waits, `held`, until it is whole) and rolls the cache back to what it
   keeps: the rest waits to be fed with the next `step`.
`push` adds a proposed token, fed by the following `step`. A context made for a new answer
(`resume`) keeps what the draft's cache holds of the prompt's draft tokens, by the model's
own record (engine/held_tokens.py), at its first sync. Knows token ids and bytes; the
model is any engine `CausalModel`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from specchat.chat.cross.text import whole_characters
from specchat.chat.cross.vocabulary import CrossVocabulary
from specchat.engine.held_tokens import kept_prefix

WORD_BACKOFF = 8
"""Draft tokens a sync may step back to find the start of a word."""
PREFILL_CHUNK = 256
"""Tokens fed per forward while a long prompt is read (`should_stop` asked between)."""
WORD_STARTS = b" \n\t"


class DraftContext:
    """The draft's tokens for the committed text (module docstring)."""

    def __init__(self, model: Any, vocabulary: CrossVocabulary):
        self.model, self.pieces = model, vocabulary.draft
        self.target = vocabulary.target
        self.resume()  # the chat makes a context per answer: the model's cache may be kept

    def reset(self) -> None:
        """A new answer: nothing read, the draft's cache empty."""
        self.resume()
        self.adopting = False
        self.model.reset()

    def resume(self) -> None:
        """A new answer: nothing read; the first sync keeps what the draft's cache holds of
        the prompt's draft tokens."""
        self.adopting = True
        self.text = bytearray()
        """The committed target text."""
        self.read = 0
        """Target tokens read into `text`."""
        self.ids: list[int] = []
        """The draft's tokens: those fed (its cache), then those waiting, then none."""
        self.ends: list[int] = []
        """Where each of `ids` ends, in bytes of `text` (past its end: a proposal's)."""
        self.verified = 0
        """How many of `ids` spell committed text."""
        self.fed = 0
        """How many of `ids` the draft's cache holds."""

    @property
    def spelled(self) -> int:
        """Bytes of committed text the verified tokens spell."""
        return self.ends[self.verified - 1] if self.verified else 0

    def held(self) -> bytes:
        """Committed bytes the draft has not read (an incomplete character)."""
        return bytes(self.text[self.spelled:])

    def sync(self, target_ids: Sequence[int]) -> None:
        """Make the draft's tokens spell the committed `target_ids` (module docstring)."""
        self.text += self.target.join(target_ids[self.read:])
        self.read = len(target_ids)
        keep = self._word_start(self._kept())
        start = self.ends[keep - 1] if keep else 0
        whole = whole_characters(bytes(self.text[start:]))
        new = self.pieces.encode(whole.decode("utf-8"))
        self.ids = self.ids[:keep] + new
        self.ends = self.ends[:keep] + offsets(start, [len(self.pieces.piece(i)) for i in new],
                                               start + len(whole))
        self.verified = len(self.ids)
        if self.adopting:
            self.adopting = False
            self.fed = kept_prefix(self.model, self.ids)
            self.model.crop(self.fed)
        elif self.fed > keep:
            self.fed = keep
            self.model.crop(keep)

    def _kept(self) -> int:
        """How many leading tokens spell a prefix of the committed text."""
        kept, at = self.verified, self.spelled
        while kept < len(self.ids):
            piece = self.pieces.piece(self.ids[kept])
            if not piece or self.text[at:at + len(piece)] != piece:
                break
            at, kept = at + len(piece), kept + 1
        return kept

    def _word_start(self, kept: int) -> int:
        """`kept`, or the start of the word it ends in when text follows it."""
        end = self.ends[kept - 1] if kept else 0
        if end >= len(self.text) or self.text[end] in WORD_STARTS:
            return kept
        for back in range(kept, max(0, kept - WORD_BACKOFF) - 1, -1):
            at = self.ends[back - 1] if back else 0
            if back == 0 or self.text[at] in WORD_STARTS:
                return back
        return kept

    def push(self, token: int) -> None:
        """A proposed token: it waits to be fed by the next `step`."""
        end = self.ends[-1] if self.ends else 0
        self.ids.append(token)
        self.ends.append(end + len(self.pieces.piece(token)))

    def step(self, should_stop: Callable[[], bool] = lambda: False) -> torch.Tensor | None:
        """Feed the waiting tokens; the logits of the next draft token (None: nothing to
        read, or `should_stop` said so while a long prompt was read)."""
        if not self.ids:
            return None
        if self.fed == len(self.ids):  # nothing waits: read the last one again
            self.fed -= 1
            self.model.crop(self.fed)
        while len(self.ids) - self.fed > PREFILL_CHUNK:
            if should_stop():
                return None
            self._feed(self.fed + PREFILL_CHUNK)
        return self._feed(len(self.ids))[-1]

    def _feed(self, upto: int) -> torch.Tensor:
        ids = torch.tensor(self.ids[self.fed:upto], dtype=torch.long, device=self.model.device)
        logits: torch.Tensor = self.model.forward(ids, keep=1)
        self.fed = upto
        return logits

    def room(self) -> int | None:
        """Tokens the draft's cache has left (None: no known limit)."""
        limit = int(getattr(self.model, "context_limit", 0) or 0)
        return limit - len(self.ids) if limit else None


def offsets(start: int, lengths: list[int], end: int) -> list[int]:
    """Where each of a run of pieces of `lengths` ends, from `start`; the last at `end` (a
    tokenizer that normalizes its text may spell it in other bytes)."""
    out, at = [], start
    for length in lengths:
        at += length
        out.append(at)
    if out:
        out[-1] = end
    return out
