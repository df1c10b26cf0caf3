"""How much of a new prompt a model's KV cache already holds, so it is not read again.

A chat's next question arrives as the whole conversation rendered again: the earlier turns
are a prefix the caches already hold (unless something else used the model meanwhile).
The record is the model's own (`HeldTokens`, engine/protocol.py: every backend notes each
forward, crop and reset in it), so no other code can leave it stale; `kept_prefix` trusts
it only while its length equals the model's `cache_length`. Knows token ids only, and
imports no torch until asked (`common_prefix` also serves chat/cross/text.py).
"""

from __future__ import annotations

from typing import Any, Sequence


def common_prefix(held: Sequence[int], prompt: Sequence[int]) -> int:
    """How many leading ids the two share."""
    shared = 0
    for a, b in zip(held, prompt):
        if a != b:
            break
        shared += 1
    return shared


def kept_prefix(model: Any, prompt: Sequence[int]) -> int:
    """How many leading tokens of `prompt` the model's cache holds, by its own record: 0 for
    a model that keeps none, or whose record disagrees with its cache's length."""
    from specchat.engine.protocol import HeldTokens

    held = getattr(model, "held", None)
    if not isinstance(held, HeldTokens) or held.length != model.cache_length:
        return 0
    return common_prefix(held.ids(), prompt)
