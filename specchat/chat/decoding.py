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

from typing import Any, Callable

from specchat.engine import Decoder, ModelDrafter, NgramDrafter, Settings


def drafter_for(pair: Any, wrap: Callable[[Any], Any] | None = None,
                adaptive_k: bool = False) -> ModelDrafter | NgramDrafter | None:
    """The engine's drafter for the pair's draft: a `ModelDrafter` over the draft model, an
    `NgramDrafter` for an n-gram lookup (anything with `max_ngram`), None without a draft.
    Under k = "auto" (`adaptive_k`) the lookup proposes all of the k the policy chose, which
    weighed the measured verify costs: its own window would only cut that shorter."""
    draft = getattr(pair, "draft", None)
    if draft is None:
        return None
    if hasattr(draft, "max_ngram"):
        return NgramDrafter(max_ngram=draft.max_ngram, min_ngram=draft.min_ngram,
                            window=not adaptive_k)
    return ModelDrafter(wrap(draft) if wrap else draft)


def decoder_for(pair: Any, speculate: bool = True, wrap: Callable[[Any], Any] | None = None,
                settings: Settings | None = None) -> Decoder:
    """A Decoder over `pair`; target-only when `speculate` is false or the pair has no draft.
    `settings`: those the decoder will run with (an adaptive k sizes n-gram proposals)."""
    adaptive_k = settings is not None and settings.k_policy is not None
    drafter = drafter_for(pair, wrap, adaptive_k) if speculate else None
    target = wrap(pair.target) if wrap else pair.target
    return Decoder(target, drafter, pair.eos_ids)
