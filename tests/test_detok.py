"""Incremental detokenizing never garbles multi-byte characters or leading spaces."""

from __future__ import annotations

import pytest

from specchat.chat.detok import IncrementalDetokenizer
from tiny import build_tokenizer

TEXTS = ["Caf\u00e9 na\u00efve \u2014 \u65e5\u672c\u8a9e \U0001f600!", " leading  spaces\n\tand tabs",
         "The quick brown fox jumps over the lazy dog."]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


@pytest.mark.parametrize("text", TEXTS)
def test_per_token_texts_join_to_the_decoded_text(tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    detok = IncrementalDetokenizer(tokenizer, tokenizer("Hi:", add_special_tokens=False)["input_ids"])
    pieces = [detok.push(t) for t in ids]
    assert "".join(pieces) + detok.flush() == tokenizer.decode(ids)
    assert all("\ufffd" not in piece for piece in pieces)


def test_a_character_split_across_tokens_is_given_to_the_token_that_completes_it(tokenizer):
    ids = tokenizer("\U0001f600", add_special_tokens=False)["input_ids"]
    assert len(ids) > 1  # byte-level: the emoji spans several tokens
    detok = IncrementalDetokenizer(tokenizer)
    pieces = [detok.push(t) for t in ids]
    assert pieces[:-1] == [""] * (len(ids) - 1) and pieces[-1] == "\U0001f600"


def test_peek_decodes_rejected_drafts_in_context_without_committing(tokenizer):
    ids = tokenizer("one two three", add_special_tokens=False)["input_ids"]
    detok = IncrementalDetokenizer(tokenizer)
    for t in ids[:2]:
        detok.push(t)
    ghost = detok.peek(ids[2:])
    assert "".join(ghost) == tokenizer.decode(ids)[len(tokenizer.decode(ids[:2])):]
    assert "".join(detok.push(t) for t in ids[2:]) == "".join(ghost)


def test_special_tokens_add_no_text(tokenizer):
    detok = IncrementalDetokenizer(tokenizer)
    assert detok.push(tokenizer.convert_tokens_to_ids("<|im_end|>")) == ""


class ByteTokens:
    """A tokenizer whose tokens are byte strings, decoded as UTF-8 with U+FFFD for what is
    incomplete (as byte-level BPE decoders do)."""

    PIECES = {0: b"a", 1: "\u04b4".encode() + b"\xd2", 2: b"\xb4&", 3: b"\xe6", 4: b"\x97",
              5: b"\xa5!"}

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return b"".join(self.PIECES[i] for i in ids).decode("utf-8", "replace")


def test_whole_characters_before_an_incomplete_one_are_given_out_at_once():
    detok = IncrementalDetokenizer(ByteTokens(), [0])
    # token 1 is a whole character and the first byte of a second one, which token 2 ends
    assert detok.push(1) == "\u04b4"
    assert detok.push(2) == "\u04b4&"
    assert [detok.push(t) for t in (3, 4, 5)] == ["", "", "\u65e5!"]


def test_a_stop_inside_a_character_holds_back_only_its_bytes():
    detok = IncrementalDetokenizer(ByteTokens(), [0])
    streamed = detok.push(1)
    assert streamed == "\u04b4" and detok.flush() == "\ufffd"
    ghost = IncrementalDetokenizer(ByteTokens(), [0]).peek([1, 2])
    assert ghost == ["\u04b4", "\u04b4&"]
