"""Whether a draft shares its target's tokenizer: the one decision every backend's
`load_draft` asks for, and the tokenizer digest `pairs --suggest` ranks drafts by.

Two vocabularies are one tokenizer when their *core* tokens agree: every token that is not
a marker has the same text at the same id in both. A marker is a token written in angle or
square brackets: special and control tokens (`<|im_end|>`, `</s>`, `<unk>`), byte-fallback
pieces (`<0x0A>`) and llama.cpp's padding rows (`[PAD151665]`). What a head holds beyond
the core does not matter: Qwen2.5-7B's 152,064 logit columns beside the 0.5B's 151,936,
special tokens one model added, or which of them a file marks special (a tokenizer read
back from a GGUF file marks fewer). Such a pair speculates as one tokenizer, the draft
proposing among the columns the target has (the loader gives the target all of its own).
Any other draft brings its own tokenizer, and the chat layer turns its text into the
target's tokens (chat/cross/).

Compared by a digest of the core tokens, computed from a transformers tokenizer's
vocabulary, a `tokenizer.json`, or a GGUF file's header (models/gguf/header.py, remembered
per file in the cache: models/gguf/cache.py), so a GGUF draft that shares its target's
tokenizer never has a tokenizer of its own converted. Loads no model.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from specchat.models.config.pairs import PairConfig
from specchat.models.config.refs import ModelRef, parse_ref

if TYPE_CHECKING:  # the backend protocol imports torch, which a digest never needs
    from specchat.models.backend import Progress

MARKER = re.compile(rb"<[^<>\s]*>|\[[^\[\]\s]*\]")
"""A token written in angle or square brackets: special, control, byte-fallback, padding."""


def core_digest(tokens: Iterable[tuple[int, bytes]]) -> str:
    """sha256 over (id, text) of the tokens that are not markers, in id order."""
    digest = hashlib.sha256()
    for token_id, text in sorted(tokens):
        if not MARKER.fullmatch(text):
            digest.update(b"%d\0%s\0" % (token_id, text))
    return digest.hexdigest()


def tokenizer_digest(tokenizer: Any) -> str:
    """The core digest of a transformers tokenizer's vocabulary."""
    return core_digest((i, text.encode("utf-8")) for text, i in tokenizer.get_vocab().items())


def tokenizer_json_digest(path: Path) -> str:
    """The core digest of a `tokenizer.json` (its model's vocabulary and its added tokens),
    read without transformers. `ValueError` where it holds no vocabulary."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    vocab = (data.get("model") or {}).get("vocab")
    if isinstance(vocab, list):  # a Unigram model: [text, score] pairs in id order
        vocab = {entry[0]: i for i, entry in enumerate(vocab)}
    if not isinstance(vocab, dict):
        raise ValueError(f"{path} holds no vocabulary")
    tokens = {(i, text.encode("utf-8")) for text, i in vocab.items()}
    tokens |= {(entry["id"], str(entry.get("content", "")).encode("utf-8"))
               for entry in data.get("added_tokens") or [] if isinstance(entry.get("id"), int)}
    return core_digest(tokens)


def gguf_digest(path: Path) -> str:
    """The core digest of a GGUF file's tokenizer, read from its header once and then
    remembered."""
    from specchat.models.gguf import cache
    from specchat.models.gguf.header import TOKENS, read_metadata

    def compute() -> str:
        texts = read_metadata(path, frozenset({TOKENS})).get(TOKENS) or []
        return core_digest(enumerate(texts))

    return cache.remembered(path, "tokenizer-core", compute)


def own_tokenizer(target_tokenizer: Any, draft_tokenizer: Any) -> Any | None:
    """The draft's tokenizer where it is not its target's, else None (one tokenizer)."""
    if tokenizer_digest(target_tokenizer) == tokenizer_digest(draft_tokenizer):
        return None
    return draft_tokenizer


def gguf_own_tokenizer(pair: PairConfig, draft: ModelRef, progress: Progress) -> Any | None:
    """For a GGUF draft of a GGUF target: None where they share a tokenizer (compared by their
    headers' digests; no tokenizer is read), else the draft's own tokenizer, read from its file."""
    from specchat.models.gguf import cache
    from specchat.models.gguf.drafts import gguf_file

    target_file = gguf_file(parse_ref(pair.target), progress)
    draft_file = gguf_file(draft, progress)
    assert target_file and draft_file, "a GGUF backend runs GGUF files only"
    if gguf_digest(target_file) == gguf_digest(draft_file):
        return None
    progress(f"the draft {pair.draft} has a tokenizer of its own: its text is re-tokenized "
             "for the target")
    return cache.load_tokenizer(draft_file, progress)
