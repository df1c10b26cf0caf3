"""Speculation across tokenizers: a draft model of another tokenizer proposes text, and the
target verifies it in its own tokens (drafter.py says how, and why it stays lossless).

- pieces.py: what each token of a tokenizer spells, in bytes;
- vocabulary.py: two tokenizers side by side, and the tokens both have;
- context.py: the draft's own tokens for the committed text;
- text.py: the draft's text as the target's tokens, and how the two line up;
- drafter.py: the engine's drafter over all of it.

`cross_drafter` builds the drafter for a loaded pair whose draft has a tokenizer of its own
(models/vocabulary.py decides, `LoadedPair.draft_tokenizer`). The engine stays free of
text: everything that reads a tokenizer lives here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from specchat.chat.cross.drafter import CrossTokenizerDrafter


def cross_drafter(pair: Any,
                  wrap: Callable[[Any], Any] | None = None) -> CrossTokenizerDrafter:
    """The `CrossTokenizerDrafter` over `pair`'s draft model (`wrap` put around it)."""
    from specchat.chat.cross.drafter import CrossTokenizerDrafter
    from specchat.chat.cross.vocabulary import cross_vocabulary

    vocabulary = cross_vocabulary(pair.tokenizer, pair.draft_tokenizer, pair.target.vocab_size,
                                  pair.draft.vocab_size)
    return CrossTokenizerDrafter(wrap(pair.draft) if wrap else pair.draft, vocabulary,
                                 pair.eos_ids)


def alignment_of(drafter: Any) -> tuple[str, ...]:
    """How the last proposal's target tokens line up with a cross-tokenizer draft's own
    tokens (`CrossTokenizerDrafter.alignment`), also inside a `LookupFirstDrafter`; () where
    no such draft proposed them (a same-tokenizer draft, or prompt lookup's copied tokens)."""
    if getattr(drafter, "by_lookup", False):
        return ()
    return getattr(getattr(drafter, "drafter", drafter), "alignment", ())
