"""Draft text as the target's tokens: the string-level proposal, and how it aligns.

The string-level method (Timor et al., ICML 2025, "SLEM"): the draft writes text in its own
tokens; the text is tokenized by the target's tokenizer and the target verifies those
tokens by exact match. `TextProposal` holds the draft's tokens of one round and answers
which target tokens they spell so far. More draft text can change the last of them (" wor"
+ "ld" is " world"), so a target token counts as complete once the draft ended (an end
token) or its next token left the target's tokens up to there as they were. Where the
committed text ends inside a character (the target's byte tokens), the draft, which read
only whole characters, must write that character's bytes first; the target's missing bytes
are proposed as its single-byte tokens.

`alignment` says, per proposed target token, how it lines up with the draft's tokens:
"one" (exactly one draft token), "merged" (several whole draft tokens), "split" (one of its
ends falls inside a draft token, or the target spelled the text in other bytes). Knows
bytes and token ids only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specchat.chat.cross.vocabulary import CrossVocabulary
from specchat.chat.events import MERGED, ONE, SPLIT
from specchat.engine.held_tokens import common_prefix


def whole_characters(data: bytes) -> bytes:
    """The longest prefix of `data` that is whole UTF-8 characters."""
    try:
        data.decode("utf-8")
        return data
    except UnicodeDecodeError as error:
        return data[:error.start]


def missing_bytes(text: bytes) -> int:
    """How many bytes the incomplete UTF-8 character ending `text` still needs (0: none)."""
    for back in range(1, min(4, len(text)) + 1):
        byte = text[-back]
        if byte & 0xC0 != 0x80:  # a lead byte (or ASCII): how long is its character?
            length = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else \
                4 if byte >> 3 == 0b11110 else 1
            return max(0, length - back)
    return 0


def boundaries(lengths: list[int], start: int = 0) -> list[int]:
    """Cumulative offsets of a run of pieces: start, start + first, ..."""
    out = [start]
    for length in lengths:
        out.append(out[-1] + length)
    return out


def alignment(target: list[int], draft: list[int]) -> list[str]:
    """Per target token (given as its piece boundaries), how it lines up with the draft's."""
    cuts = set(draft)
    out = []
    for start, end in zip(target, target[1:]):
        if start not in cuts or end not in cuts:
            out.append(SPLIT)
        else:
            out.append(ONE if not any(start < cut < end for cut in cuts) else MERGED)
    return out


@dataclass
class TextProposal:
    """One round's draft tokens and the target tokens they spell (module docstring)."""

    vocabulary: CrossVocabulary
    held: bytes
    """Committed bytes the draft has not read: the start of an incomplete character."""
    committed_tail: bytes = b""
    """The end of the committed text (to tell how many bytes its last character lacks)."""
    tokens: list[int] = field(default_factory=list)
    end: int | None = None
    """The target token an end token of the draft stands for (an EOS), if it wrote one."""
    ended: bool = False
    ids: list[int] = field(default_factory=list)
    """The target tokens the draft's text spells so far."""
    aligned: list[str] = field(default_factory=list)
    stable: int = 0
    """How many of `ids` the draft's last token left as they were."""

    def add(self, token: int) -> int:
        """Add a draft token; how many target tokens are complete now."""
        vocabulary = self.vocabulary
        if token in vocabulary.draft.special:
            mapped = int(vocabulary.to_target[token]) if token < vocabulary.draft_columns else -1
            self.end, self.ended = (mapped if mapped >= 0 else None), True
        else:
            self.tokens.append(token)
            previous = self.ids
            self.ids, self.aligned = self.spelled()
            self.stable = common_prefix(previous, self.ids)
        return self.complete()

    def complete(self) -> int:
        """Target tokens that more draft text will not change: all once the draft ended, else
        those its last token left as they were (" hel" is spelled " ", "h", "e", "l" by a
        target that has " hello"; " hel" + "lo" makes them one)."""
        return len(self.ids) if self.ended else self.stable

    def spelled(self) -> tuple[list[int], list[str]]:
        """(the target tokens the draft's text spells, their alignment)."""
        draft, target = self.vocabulary.draft, self.vocabulary.target
        data = draft.join(self.tokens)
        if not data.startswith(self.held[:len(data)]):
            return [], []  # the draft went another way inside the committed character
        lead = self._lead(data[len(self.held):])
        if lead is None:
            return [], []
        body = data[len(self.held) + len(lead):]
        ids = lead + target.encode(whole_characters(body).decode("utf-8"))
        target_pieces = [len(target.piece(t)) for t in ids]
        aligned = alignment(boundaries(target_pieces, len(self.held)),
                            boundaries([len(draft.piece(t)) for t in self.tokens]))
        if target.join(ids) != data[len(self.held):][:sum(target_pieces)]:
            aligned = [SPLIT] * len(ids)
        return ids, aligned

    def _lead(self, data: bytes) -> list[int] | None:
        """The target's single-byte tokens completing the committed character (None: it
        has none for one of them)."""
        wanted = data[:missing_bytes(self.committed_tail)]
        single = self.vocabulary.target.single_byte
        if any(byte not in single for byte in wanted):
            return None
        return [single[byte] for byte in wanted]

    def result(self, k: int) -> tuple[list[int], tuple[str, ...]]:
        """(the target tokens to propose, at most k, their alignment): the complete ones, or
        the one spelled so far where none is complete; an end token after all of them."""
        complete = self.complete()
        count = min(k, complete if complete or self.ended else len(self.ids))
        ids, aligned = self.ids[:count], self.aligned[:count]
        if self.ended and self.end is not None and count == len(self.ids) and count < k:
            ids, aligned = ids + [self.end], aligned + [ONE]
        return ids, tuple(aligned)
