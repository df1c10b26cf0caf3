"""Several sequences through one `Int8Model`'s weights at once, each with its own KV cache:
what generates a draft head's training data (`specchat distill --head`) at a few times the
token rate of one stream.

One call feeds each sequence some rows (a prompt, or the one token it sampled last): every
linear runs once over all the rows together, which on fbgemm's int8 kernels costs little
more than one row; rope, the key/value writes and attention run per sequence, over its own
cache. A row's logits and features equal what the `Int8Model` alone computes for the same
sequence, bit for bit (its linears are batch invariant and attention is per row, with the
very call a single step makes). Knows nothing about prompts, sampling or files.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specchat.models.blocks.kv_buffer import KVBuffer
from specchat.models.blocks.logits import scatter_logits
from specchat.models.int8.model import CacheViews, Int8Layer, Int8Model
from specchat.models.int8.scripted import compiled


@dataclass
class Segment:
    """Rows of one sequence in a batched call: its cache's per-layer views and where they
    start."""

    views: CacheViews
    start: int
    ids: torch.Tensor


class Int8Batch:
    """`count` sequences decoded together on one `Int8Model`'s weights (module docstring)."""

    def __init__(self, model: Int8Model, count: int):
        arch = model.arch
        self.model = model
        self.caches = [KVBuffer(arch.layers, arch.kv_heads, arch.head_dim, torch.float32,
                                model.device, token_major=True) for _ in range(count)]
        self.views = [CacheViews.of(cache) for cache in self.caches]
        """Each cache's per-layer views, as the model keeps its own (made again on growth)."""
        self.lengths = [0] * count

    def reset(self, index: int) -> None:
        """Start sequence `index` over (its cache is reused)."""
        self.lengths[index] = 0

    @torch.inference_mode()
    def forward(self, feeds: dict[int, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Append each sequence's ids (`feeds`: index -> ids [n]); (logits of each sequence's
        last row [len(feeds), vocab] in `feeds`' order, the features of every row fed
        [sum of n, hidden] in that order)."""
        for i, ids in feeds.items():
            if self.caches[i].make_room(self.lengths[i] + int(ids.numel())):
                self.views[i] = CacheViews.of(self.caches[i])
        segments = [Segment(self.views[i], self.lengths[i], ids.reshape(-1).cpu())
                    for i, ids in feeds.items()]
        x = self._embed(torch.cat([s.ids for s in segments]))
        for index, layer in enumerate(self.model.layers):
            x = self._layer(index, layer, x, segments)
        for i, ids in feeds.items():
            self.lengths[i] += int(ids.numel())
        model = self.model
        features = compiled("norm")(x, model.norm, model.arch.eps, model.native_rows)
        ends = torch.tensor([len(s.ids) for s in segments]).cumsum(0) - 1
        return self._logits(features[ends]), features

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        model = self.model
        return model.embed_rows[ids].float() * model.embed_scale[ids].unsqueeze(1)

    def _layer(self, index: int, layer: Int8Layer, x: torch.Tensor,
               segments: list[Segment]) -> torch.Tensor:
        model = self.model
        eps, native = model.arch.eps, model.native_rows
        qkv = layer.qkv(compiled("norm")(x, layer.attn_norm, eps, native))
        attended, row = [], 0
        for segment in segments:
            n = int(segment.ids.shape[0])
            attended.append(self._attend(index, qkv[row:row + n], segment))
            row += n
        x = layer.o(torch.cat(attended), residual=x)
        gate_up = layer.gate_up(compiled("norm")(x, layer.ffn_norm, eps, native))
        return layer.down(compiled("gated")(gate_up, native), residual=x)

    def _attend(self, index: int, qkv: torch.Tensor, segment: Segment) -> torch.Tensor:
        """One sequence's rows: rope, their keys and values into its cache, attention (the
        very call the model's own layer makes, scripted.attend_rows)."""
        arch, n, start = self.model.arch, int(qkv.shape[0]), segment.start
        turns = self.model.rope.at(start, start + n)
        cache = segment.views.layers[index]
        return compiled("attend_rows")(qkv, turns, cache[0], cache[1], cache[2], cache[3],
                                       start, arch.heads, arch.kv_heads, arch.head_dim,
                                       self.model.native_rows)

    def _logits(self, normed: torch.Tensor) -> torch.Tensor:
        model = self.model
        rows = model.head(normed)
        if model.vocab is None:
            return rows[:, : model.vocab_size]
        return scatter_logits(rows, model.vocab, model.vocab_size)
