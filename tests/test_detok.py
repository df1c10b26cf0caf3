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
