"""A trained draft head behind the engine's `DraftHead` protocol, drafting for its target.

The head's network (network.py) runs one row or a few at a time over a KV cache of its own
rows (one layer; rolling back only lowers the length). What it shares with its target comes
in as two callables, made by the target's backend: `embed` (token ids -> the target's
embeddings) and `output` (feature guesses -> logits over the head's vocabulary, through the
target's own output rows); the logits reach the engine over the full vocabulary, -inf
outside the head's. On a CPU the head's linears multiply its stored int8 rows through the
int8 backend's kernels (`kernels`); elsewhere they are float copies in the target's dtype.
Knows nothing about files, decoding or which backend made the callables.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from specchat.models.blocks.kv_buffer import CacheCursor, KVBuffer
from specchat.models.blocks.logits import scatter_logits
from specchat.models.head.network import HeadNetwork


class HeadRuntime:
    """A head drafting for one target (module docstring)."""

    def __init__(self, network: HeadNetwork, vocab: list[int], vocab_size: int,
                 embed: Callable[[torch.Tensor], torch.Tensor],
                 output: Callable[[torch.Tensor], torch.Tensor],
                 device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32,
                 output_bytes: int = 0):
        self.network = network
        self.output_bytes = output_bytes
        """Bytes of the head's own copy of the target's output rows of its vocabulary (what
        `output` multiplies by: gathered at load, so they are the draft's memory)."""
        self.device, self.dtype = torch.device(device), dtype
        self.vocab = torch.tensor(sorted(vocab), dtype=torch.long, device=self.device)
        self.vocab_size = vocab_size
        self.embed, self.output = embed, output
        shape = network.shape
        self.hidden_size = shape.hidden
        self.kv = KVBuffer(1, shape.kv_heads, shape.head_dim, dtype, self.device)
        self.cursor = CacheCursor()
        self.held = self.cursor.held
        """The token ids of the head's rows, recorded as they are fed (engine/protocol.py's
        `HeldTokens`)."""

    @property
    def cache_length(self) -> int:
        return self.cursor.length

    @property
    def parameter_bytes(self) -> int:
        """Bytes of the head's own weights as it computes with them (a linear's int8 rows where
        it has a kernel, whose float weight is then emptied; every other parameter as stored)
        and of its copy of the target's output rows (the embedding it reads is the target's)."""
        rows = sum(kernel.weight_bytes for kernel in self.network.kernels.values())
        stored = sum(p.numel() * p.element_size() for p in self.network.parameters())
        return self.output_bytes + rows + stored

    def reset(self) -> None:
        self.cursor.reset()

    def crop(self, length: int) -> None:
        self.cursor.crop(length)

    @torch.inference_mode()
    def forward(self, features: torch.Tensor, ids: torch.Tensor,
                keep: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        ids = ids.reshape(-1).to(self.device)
        start, n = self.cursor.length, int(ids.shape[0])
        self.kv.make_room(start + n)
        positions = torch.arange(start, start + n, device=self.device)
        x = self.network.inputs(features.to(self.device, self.dtype),
                                self.embed(ids).to(self.dtype))
        q, k, v = self.network.attention_inputs(x, positions)
        self.kv.keys[0, :, start:start + n] = k.transpose(0, 1)
        self.kv.values[0, :, start:start + n] = v.transpose(0, 1)
        self.cursor.fed(start, ids)
        attended = self._attend(q, start, n)
        guess = self.network.finish(x[-keep:], attended[-keep:])
        logits = self.output(guess).float()
        return scatter_logits(logits, self.vocab, self.vocab_size), guess

    def _attend(self, q: torch.Tensor, start: int, n: int) -> torch.Tensor:
        """Causal attention of rows start.. over the cache -> [n, heads * head_dim]."""
        end = start + n
        keys = self.kv.keys[0, :, :end].unsqueeze(0)
        values = self.kv.values[0, :, :end].unsqueeze(0)
        mask = None
        if n > 1:
            rows = torch.arange(start, end, device=self.device)
            mask = torch.arange(end, device=self.device) <= rows[:, None]
        out = F.scaled_dot_product_attention(q.transpose(0, 1).unsqueeze(0), keys, values,
                                             attn_mask=mask, enable_gqa=True)
        return out[0].transpose(0, 1).reshape(n, -1)
