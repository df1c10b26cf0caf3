"""The bytes each token of a tokenizer spells, and the exact tokens of a piece of text.

Two tokenizers can only be compared through the text their tokens stand for, and text
here means bytes: a token may hold part of a multi-byte character (a byte-level BPE's
`Ġ`-alphabet pieces, a SentencePiece byte-fallback `<0xE6>`), which no `str` can hold. So
`TokenPieces` keeps, per id, the bytes the token adds to a text:
- byte-level BPE (GPT-2, Llama 3, Qwen, SmolLM): each character of the piece maps back to
  one byte (the GPT-2 byte alphabet, `byte_alphabet`);
- SentencePiece style (Llama 2, Mistral, Gemma): `▁` is a space, `<0xNN>` one byte;
- anything else: the token decoded on its own;
- an added token (special or not): its content, as written.

`encode` tokenizes a piece of text that continues a longer one: no special tokens added,
and no space put in front (a SentencePiece tokenizer prepends one to every text it is
given; `encode` asks it for a marker plus the text and drops the marker's tokens).
Works with any transformers fast tokenizer; imports none.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Sequence

BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")
MARKER = "\n"
"""Put before a text whose tokenizer prepends a space: its tokens are dropped again."""


@lru_cache(maxsize=1)
def byte_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet, character -> byte: printable bytes stand for themselves,
    the others (controls, space, 0x7F-0xA0, 0xAD) for the characters from U+0100 on."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    alphabet, extra = {chr(b): b for b in printable}, 0
    for byte in range(256):
        if byte not in printable:
            alphabet[chr(256 + extra)] = byte
            extra += 1
    return alphabet


def decoder_kind(tokenizer: Any) -> str:
    """"bytelevel", "sentencepiece" or "other", from the fast tokenizer's decoder."""
    decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
    if decoder is None:
        return "other"
    state = decoder.__getstate__()  # the decoder as JSON bytes
    if b'"ByteLevel"' in state:
        return "bytelevel"
    if b"ByteFallback" in state or b"Metaspace" in state or "\u2581".encode() in state:
        return "sentencepiece"
    return "other"


def piece_bytes(piece: str, kind: str) -> bytes | None:
    """The bytes of a vocabulary piece under `kind`'s spelling (None: spelled otherwise)."""
    if kind == "bytelevel":
        alphabet = byte_alphabet()
        if all(ch in alphabet for ch in piece):
            return bytes(alphabet[ch] for ch in piece)
        return None
    if kind == "sentencepiece":
        byte = BYTE_TOKEN.fullmatch(piece)
        return bytes([int(byte.group(1), 16)]) if byte else piece.replace("\u2581", " ").encode()
    return None


class TokenPieces:
    """What each token of one tokenizer spells, as bytes (module docstring)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.kind = decoder_kind(tokenizer)
        added = dict(getattr(tokenizer, "added_tokens_decoder", {}) or {})
        self.special = frozenset(i for i, token in added.items() if token.special)
        """Ids of special tokens: control tokens such as `<|im_end|>`, never plain text."""
        self.pieces = self._pieces(added)
        self.single_byte: dict[int, int] = {}
        """byte value -> a token that spells exactly that byte (where there is one)."""
        for token_id, piece in enumerate(self.pieces):
            if len(piece) == 1 and token_id not in self.special:
                self.single_byte.setdefault(piece[0], token_id)
        self.prefix_space = bool(tokenizer.encode("a", add_special_tokens=False)) and \
            self.join(tokenizer.encode("a", add_special_tokens=False)) != b"a"

    def _pieces(self, added: dict[int, Any]) -> list[bytes]:
        size = max(len(self.tokenizer), max(added, default=-1) + 1)
        names = self.tokenizer.convert_ids_to_tokens(list(range(size)))
        pieces = []
        for token_id, name in enumerate(names):
            if token_id in added:
                pieces.append(str(added[token_id].content).encode())
                continue
            spelled = piece_bytes(name, self.kind) if name is not None else b""
            if spelled is None:
                spelled = self.tokenizer.decode([token_id]).encode()
            pieces.append(spelled)
        return pieces

    def __len__(self) -> int:
        return len(self.pieces)

    def piece(self, token_id: int) -> bytes:
        return self.pieces[token_id] if 0 <= token_id < len(self.pieces) else b""

    def join(self, ids: Sequence[int]) -> bytes:
        return b"".join(self.piece(i) for i in ids)

    def encode(self, text: str) -> list[int]:
        """The tokens of `text` as the continuation of a longer text (module docstring)."""
        if not text:
            return []
        ids: list[int] = list(self.tokenizer.encode(text, add_special_tokens=False))
        if not self.prefix_space:
            return ids
        marked: list[int] = list(self.tokenizer.encode(MARKER + text, add_special_tokens=False))
        for cut in range(1, min(len(marked), 4)):
            if self.join(marked[:cut]).strip(b" ") == MARKER.encode():
                return marked[cut:]
        return ids
