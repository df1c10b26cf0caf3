"""Keys and values of every layer in one preallocated buffer that doubles when full, and
the cursor that says how far it is filled.

Rolling a cache back is lowering the cursor's length; nothing here is copied or freed
then. Knows nothing about attention or models.
"""

from __future__ import annotations

import torch

from specchat.engine.protocol import HeldTokens

FIRST_CAPACITY = 256


class KVBuffer:
    """Keys and values of every layer, [layers, kv_heads, capacity, head_dim] (head-major: each
    head's positions contiguous), or [layers, capacity, kv_heads, head_dim] with `token_major`
    (each position's heads contiguous: a forward writes its new positions in one copy);
    doubles when full (`make_room` says whether it did)."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype, device,
                 token_major: bool = False):
        self.axis = 1 if token_major else 2
        """The dimension of positions."""
        shape = [layers, kv_heads, head_dim]
        shape.insert(self.axis, FIRST_CAPACITY)
        self.shape = tuple(shape)
        self.keys = torch.zeros(self.shape, dtype=dtype, device=device)
        self.values = torch.zeros_like(self.keys)

    @property
    def capacity(self) -> int:
        return self.keys.shape[self.axis]

    def make_room(self, length: int) -> bool:
        """Room for `length` positions; True when the buffers grew (new tensors)."""
        if length <= self.capacity:
            return False
        capacity = self.capacity
        while capacity < length:
            capacity *= 2
        self.keys = grown(self.keys, capacity, self.axis)
        self.values = grown(self.values, capacity, self.axis)
        return True


def grown(buffer: torch.Tensor, capacity: int, axis: int = 2) -> torch.Tensor:
    shape = list(buffer.shape)
    shape[axis] = capacity
    bigger = buffer.new_zeros(shape)
    bigger.narrow(axis, 0, buffer.shape[axis]).copy_(buffer)
    return bigger


class CacheCursor:
    """How far a model's own key/value buffers are filled, and the ids they hold (the
    model's `HeldTokens` record, which the engine reads as `model.held`): the one owner of
    a forward's start, a crop and a reset for the backends that write their own buffers.
    Whatever lies past `length` is overwritten by the next forward."""

    def __init__(self) -> None:
        self.length = 0
        self.held = HeldTokens()

    def reset(self) -> None:
        self.length = 0
        self.held.clear()

    def crop(self, length: int) -> None:
        """Lower the length (never raise it)."""
        self.length = min(self.length, max(0, int(length)))
        self.held.crop(self.length)

    def fed(self, start: int, ids: torch.Tensor) -> None:
        """A forward wrote `ids` after the first `start` positions."""
        self.length = start + int(ids.shape[0])
        self.held.fed(start, ids)
