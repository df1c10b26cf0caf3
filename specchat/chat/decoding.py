"""The one place that builds a `Decoder` for a loaded pair: its target, its drafter
(or none, for target-only decoding) and its end-of-sequence ids.

Also the one place that turns the pair's draft (a model adapted to the engine's
protocol, or an n-gram lookup) into the engine's drafter object: the models layer
hands over models only and never imports the engine's drafters.

Used by the conversation (chat.session) and by every benchmark arm, so that what
is measured decodes exactly as the chat does. `wrap` lets a caller put a wrapper
around each model (timing, profiling) without building the decoder itself.
Knows nothing about text or about how the pair was loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from specchat.chat.cross import cross_drafter
from specchat.chat.narrow_draft import fitted
from specchat.engine import (Decoder, DraftHead, HeadDrafter, LookupFirstDrafter, ModelDrafter,
                             NgramDrafter, Settings)

if TYPE_CHECKING:
    from specchat.engine.decoder import Drafter


def drafter_for(pair: Any, wrap: Callable[[Any], Any] | None = None,
                adaptive_k: bool = False) -> Drafter | None:
    """The engine's drafter for the pair's draft: a `ModelDrafter` over the draft model, a
    `CrossTokenizerDrafter` over one with a tokenizer of its own (`draft_tokenizer`,
    chat/cross/), a `HeadDrafter` for a draft head (an engine `DraftHead`: it reads the
    target's features), any of the three inside a `LookupFirstDrafter` where the pair's
    `lookup` key asks for prompt lookup too; an `NgramDrafter` for an n-gram lookup (anything
    with `max_ngram`), None without a draft.
    Under k = "auto" (`adaptive_k`) the lookup proposes all of the k the policy chose, which
    weighed the measured verify costs: its own window would only cut that shorter. `wrap`
    wraps draft models only: a head is no `CausalModel`, and its features come from the
    pair's own target, wrapped or not."""
    draft = getattr(pair, "draft", None)
    if draft is None:
        return None
    if hasattr(draft, "max_ngram"):
        return NgramDrafter(max_ngram=draft.max_ngram, min_ngram=draft.min_ngram,
                            window=not adaptive_k)
    drafter: Drafter
    if isinstance(draft, DraftHead):
        drafter = HeadDrafter(draft, pair.target)
    elif getattr(pair, "draft_tokenizer", None) is not None:
        drafter = cross_drafter(pair, wrap)
    else:
        draft = fitted(draft, pair.target)
        drafter = ModelDrafter(wrap(draft) if wrap else draft)
    config = getattr(pair, "config", None)
    if config is None or not getattr(config, "lookup", False):
        return drafter
    n = config.ngram_n
    return LookupFirstDrafter(drafter, NgramDrafter(max_ngram=n, min_ngram=min(2, n),
                                                    window=not adaptive_k))


def decoder_for(pair: Any, speculate: bool = True, wrap: Callable[[Any], Any] | None = None,
                settings: Settings | None = None) -> Decoder:
    """A Decoder over `pair`; target-only when `speculate` is false or the pair has no draft.
    `settings`: those the decoder will run with (an adaptive k sizes n-gram proposals)."""
    adaptive_k = settings is not None and settings.k_policy is not None
    drafter = drafter_for(pair, wrap, adaptive_k) if speculate else None
    target = wrap(pair.target) if wrap else pair.target
    return Decoder(target, drafter, pair.eos_ids)
