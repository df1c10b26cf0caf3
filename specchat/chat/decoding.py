"""The one place that builds a `Decoder` for a loaded pair: its target, its drafter
(or none, for target-only decoding) and its end-of-sequence ids.

Used by the conversation (chat.session) and by every benchmark arm, so that what
is measured decodes exactly as the chat does. `wrap` lets a caller put a wrapper
around each model (timing, profiling) without building the decoder itself.
Knows nothing about text or about how the pair was loaded.
"""

from __future__ import annotations

from typing import Any, Callable

from specchat.engine import Decoder, ModelDrafter


def decoder_for(pair: Any, speculate: bool = True,
                wrap: Callable[[Any], Any] | None = None) -> Decoder:
    """A Decoder over `pair`; target-only when `speculate` is false or the pair has no draft."""
    drafter = pair.drafter if speculate else None
    if wrap is None:
        return Decoder(pair.target, drafter, pair.eos_ids)
    draft_model = getattr(drafter, "model", None)
    if draft_model is not None:
        drafter = ModelDrafter(wrap(draft_model))
    return Decoder(wrap(pair.target), drafter, pair.eos_ids)
