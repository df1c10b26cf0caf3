"""Keys and values of every layer in one preallocated buffer that doubles when full.

Rolling a cache back is lowering a length the model keeps; nothing here is copied or freed
then. Knows nothing about attention or models.
"""

from __future__ import annotations

import torch

FIRST_CAPACITY = 256


class KVBuffer:
    """Keys and values of every layer, [layers, kv_heads, capacity, head_dim]; doubles when full."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype, device):
        self.shape = (layers, kv_heads, FIRST_CAPACITY, head_dim)
        self.keys = torch.zeros(self.shape, dtype=dtype, device=device)
        self.values = torch.zeros_like(self.keys)

    @property
    def capacity(self) -> int:
        return self.keys.shape[2]

    def make_room(self, length: int) -> None:
        if length <= self.capacity:
            return
        capacity = self.capacity
        while capacity < length:
            capacity *= 2
        self.keys = grown(self.keys, capacity)
        self.values = grown(self.values, capacity)


def grown(buffer: torch.Tensor, capacity: int) -> torch.Tensor:
    bigger = buffer.new_zeros(buffer.shape[:2] + (capacity,) + buffer.shape[3:])
    bigger[:, :, : buffer.shape[2]] = buffer
    return bigger
