"""The int8 backend's forward: a Llama- or Qwen2-style decoder on `FlatLinear`s, behind the
engine's `CausalModel` protocol, whose verify rows equal single steps bit for bit.

A row's logits must not depend on the rows computed with it (the engine then gets the same
greedy answer speculating or not, whatever k and whatever the prompt's chunking). Every
operation here keeps that by construction:
- the linears are `FlatLinear` (each row scaled on its own; a fixed quantization range), or
  `TiledLinear` for a matrix kept in the file's Q4_K form (q4k.py: each row scaled on its own,
  exact integer sums, one lane an output);
- norms, rope, the activation and the residuals work row by row, element by element;
- attention runs one query row at a time, with the very call (same shapes, same keys) a
  single step at that position makes; a batched kernel would pick its blocking from the
  batch's shape and round differently.
Each layer's arithmetic runs as TorchScript (scripted.py), which spends less time
dispatching its operations than Python does. Where rows.py's C++ operations build here
(`native_rows`), the norms, the activation and rope, cache writes and attention for all a
call's rows run as one call each: the same guarantees, a fraction of torch's calls (its
per-row attention cost 83 microseconds a layer on the AMD machine, rows.py's docstring).

Keys and values live in one preallocated buffer per layer that doubles when full (the lean
forward's `KVBuffer`); rolling back only lowers the length. A draft with a reduced output
vocabulary multiplies only those head rows (`head_ids`), the other logits -inf. Knows
nothing about files, tokenizers or decoding.
"""

from __future__ import annotations

from pathlib import Path

from dataclasses import dataclass, field

import torch

from specchat.models.device.cores import capped_threads
import specchat.models.int8.linear as linear
from specchat.models.int8.convert import Architecture, fused_parts, opened
from specchat.models.int8.linear import FlatLinear, placeholder_packed
from specchat.models.int8.q4k import TiledLinear, kernel_library, linear_of, tile_bytes, tiled_bits
from specchat.models.int8.rows import rows_library
from specchat.models.int8.scripted import compiled
from specchat.models.blocks.kv_buffer import CacheCursor, KVBuffer
from specchat.models.blocks.logits import scatter_logits

PREFILL_CHUNK = 256
"""Most tokens fed through the layers at once (a long prompt goes in pieces)."""
PREFILL_TOKENS = 16
"""A forward of more tokens than this keeping one row of logits is a prompt's prefill: it
runs on `prefill_threads` (llama.cpp's rule, models/llamacpp/model.py)."""


Linear = FlatLinear | TiledLinear
NO_TILES = torch.empty(0, dtype=torch.uint8)
"""scripted.product's sign that a linear is not on a tiled kernel (Q4_K or Q6_K)."""


@dataclass
class Int8Layer:
    """One decoder layer: two norms and four linears, int8 rows or Q4_K tiles."""

    attn_norm: torch.Tensor
    qkv: Linear
    o: Linear
    ffn_norm: torch.Tensor
    gate_up: Linear
    down: Linear

    @classmethod
    def of(cls, tensors: dict[str, torch.Tensor], index: int, reduce_range: bool,
           kernel: str = linear.FBGEMM, tiles: dict[str, torch.Tensor] | None = None) -> "Int8Layer":
        """Layer `index` of the cached tensors; a matrix in `tiles` (q4k.file_tiles) goes on
        the Q4_K kernel, the others on `kernel` (fbgemm where that is Q4K)."""

        def packed(name: str, bias: torch.Tensor | None = None) -> Linear:
            key = f"{index}.{name}"
            kept = linear_of(tiles or {}, key, int(tensors[f"{key}.rows"].shape[0]), bias)
            return kept or FlatLinear(tensors[f"{key}.rows"], tensors[f"{key}.scale"], bias,
                                      reduce_range, linear.rows_kernel(kernel))

        bias = tensors.get(f"{index}.qkv.bias")
        return cls(tensors[f"{index}.attn_norm"].clone(), packed("qkv", owned(bias)),
                   packed("o"), tensors[f"{index}.ffn_norm"].clone(), packed("gate_up"), packed("down"))

    def linears(self) -> list[Linear]:
        return [self.qkv, self.o, self.gate_up, self.down]

    def __post_init__(self) -> None:
        self.norms = [self.attn_norm, self.ffn_norm]
        rows = [each for each in self.linears() if isinstance(each, FlatLinear)]
        self.onednn = [each.onednn.arguments() for each in rows if each.onednn is not None]
        self.packed = [] if self.onednn else [
            each.packed if isinstance(each, FlatLinear) and each.packed is not None
            else placeholder_packed() for each in self.linears()]
        self.tiles = [each.tiles if isinstance(each, TiledLinear) else NO_TILES
                      for each in self.linears()]
        self.bits = [each.bits if isinstance(each, TiledLinear) else 0 for each in self.linears()]
        self.outputs = [each.outputs for each in self.linears()]
        self.inputs = [each.inputs for each in self.linears()]
        self.reduce_range = rows[0].reduce_range if rows else False
        """What scripted.decoder_layer takes, in its order (lists made once)."""


class Rope:
    """Rotations of adjacent pairs as complex numbers, one row per position (grown on demand);
    `factors` (llama 3's `rope_freqs`) divide each frequency, as llama.cpp applies them."""

    def __init__(self, head_dim: int, base: float, factors: torch.Tensor | None = None):
        self.inverse = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        if factors is not None:
            self.inverse = self.inverse / factors.double()
        self.table = torch.empty(0, head_dim // 2, dtype=torch.complex64)

    def at(self, start: int, end: int) -> torch.Tensor:
        """[end - start, 1, head_dim / 2] rotations for positions start..end-1."""
        if end > self.table.shape[0]:
            positions = torch.arange(max(end, 2 * self.table.shape[0], 256), dtype=torch.float64)
            angles = torch.outer(positions, self.inverse)
            self.table = torch.polar(torch.ones_like(angles), angles).to(torch.complex64)
        return self.table[start:end].unsqueeze(1)


class Int8Model:
    """A GGUF model on int8 weights (module docstring), with its own KV cache."""

    device = torch.device("cpu")

    def __init__(self, arch: Architecture, tensors: dict[str, torch.Tensor],
                 reduce_range: bool = False, head_ids: list[int] | None = None,
                 vocab_size: int | None = None, threads: int | None = None,
                 prefill_threads: int | None = None, kernel: str = linear.FBGEMM,
                 tiles: dict[str, torch.Tensor] | None = None, native_rows: bool = False):
        self.path: Path | None = None
        """The GGUF file the weights were converted from (the backend sets it)."""
        self.arch = arch
        self.threads, self.threads_note = capped_threads(threads)
        self.prefill_threads = capped_threads(prefill_threads)[0] if prefill_threads else self.threads
        self.kernel = kernel
        """The kernel its linears multiply with (linear.py: fbgemm, oneDNN's flat verify, or
        Q4K: the Q4_K kernel for the matrices in `tiles`, fbgemm for the rest)."""
        if kernel == linear.Q4K and tiles:
            kernel_library()  # compiled and loaded once (q4k.q4k_multiplies has, in a load)
        self.native_rows = native_rows
        """The norms, attention and activation on rows.py's operations (loaded here; the
        backend asks rows.native_rows first), else on torch's."""
        if native_rows:
            rows_library()
        self.layers = packed_layers(tensors, arch.layers, reduce_range, self.prefill_threads,
                                    kernel, tiles if kernel == linear.Q4K else None)
        self.embed_rows = tensors["embed.rows"].clone()
        self.embed_scale, self.norm = tensors["embed.scale"].clone(), tensors["norm"].clone()
        self.vocab = None if head_ids is None else torch.tensor(sorted(head_ids), dtype=torch.long)
        self.head = head_linear(tensors, self.vocab, reduce_range, kernel,
                                tiles if kernel == linear.Q4K else None)
        self.vocab_size = vocab_size or arch.vocab
        self.rope = Rope(arch.head_dim, arch.rope_base, tensors.get("rope_factors"))
        self.kv = KVBuffer(arch.layers, arch.kv_heads, arch.head_dim, torch.float32, self.device,
                           token_major=True)
        self.views = CacheViews.of(self.kv)
        self.pins = torch.tensor(linear.PIN_VALUES)
        """The pinned input columns' values (linear.py), for the scripted layers."""
        self.cursor = CacheCursor()
        self.held = self.cursor.held
        """The ids the cache holds, recorded as they are fed (engine/protocol.py's `HeldTokens`)."""
        self.features: torch.Tensor | None = None
        """[n, hidden]: the last forward's final hidden states (after the last norm: what the
        output matrix multiplies) at every one of the n tokens it fed, kept for a draft head
        that reads the target's own features (engine/protocol.py's `FeatureSource`); a
        norm of n rows, nothing beside a forward's matrices."""

    @property
    def cache_length(self) -> int:
        return self.cursor.length

    @property
    def context_limit(self) -> int:
        return self.arch.context

    @property
    def kv_cache_bytes(self) -> int:
        return 2 * self.kv.keys.numel() * self.kv.keys.element_size()

    @property
    def parameter_bytes(self) -> int:
        linears = [linear for layer in self.layers for linear in layer.linears()] + [self.head]
        embed = self.embed_rows.numel() + 4 * self.embed_scale.numel()
        return sum(linear.weight_bytes for linear in linears) + embed

    def reset(self) -> None:
        self.cursor.reset()

    def crop(self, length: int) -> None:
        """Lower the length; whatever lies past it is overwritten by the next forward."""
        self.cursor.crop(length)

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        ids = ids.reshape(-1).cpu()
        use_threads(self.prefill_threads if keep == 1 and ids.shape[0] > PREFILL_TOKENS
                    else self.threads)
        hidden = [self._feed(ids[start:start + PREFILL_CHUNK])
                  for start in range(0, int(ids.shape[0]), PREFILL_CHUNK)]
        states = torch.cat(hidden) if len(hidden) > 1 else hidden[0]
        self.features = compiled("norm")(states, self.norm, self.arch.eps, self.native_rows)
        return self._logits(self.features[-keep:])

    def _feed(self, ids: torch.Tensor) -> torch.Tensor:
        """Run `ids` through every layer, appending their keys and values; the last hidden states."""
        start, n = self.cursor.length, int(ids.shape[0])
        end = start + n
        if self.kv.make_room(end):
            self.views = CacheViews.of(self.kv)
        x = self.embed_rows[ids].float() * self.embed_scale[ids].unsqueeze(1)
        turns = self.rope.at(start, end)
        for index, layer in enumerate(self.layers):
            x = self._layer(index, layer, x, turns, start)
        self.cursor.fed(start, ids)
        return x

    def _layer(self, index: int, layer: Int8Layer, x: torch.Tensor, turns: torch.Tensor,
               start: int) -> torch.Tensor:
        arch = self.arch
        return compiled("decoder_layer")(x, layer.norms, arch.eps, layer.packed, layer.onednn,
                                         layer.tiles, layer.bits, layer.outputs, layer.inputs,
                                         layer.qkv.bias,
                                         self.pins, layer.reduce_range,
                                         turns, self.views.layers[index], start, arch.heads,
                                         arch.kv_heads, arch.head_dim, self.native_rows)

    def _logits(self, normed: torch.Tensor) -> torch.Tensor:
        rows = self.head(normed)
        if self.vocab is None:
            return rows[:, : self.vocab_size]
        return scatter_logits(rows, self.vocab, self.vocab_size)


def owned(tensor: torch.Tensor | None) -> torch.Tensor | None:
    """A copy in memory of a tensor read from the memory-mapped cache file (a file changed
    under a mapping would fault the process; packed matrices are copies already)."""
    return None if tensor is None else tensor.clone()


def packed_layers(tensors: dict[str, torch.Tensor], count: int, reduce_range: bool,
                  threads: int, kernel: str = linear.FBGEMM,
                  tiles: dict[str, torch.Tensor] | None = None) -> list[Int8Layer]:
    """Every layer's linears packed for `kernel`, on `threads` threads (packing runs on one
    core per matrix and takes most of a cached model's load time)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, threads)) as pool:
        return list(pool.map(lambda index: Int8Layer.of(tensors, index, reduce_range, kernel, tiles),
                             range(count)))


def use_threads(threads: int) -> None:
    """torch's intra-op threads (process-wide: set only when it changes)."""
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@dataclass
class CacheViews:
    """Per-layer views of a token-major `KVBuffer`, made once per growth (a view costs a call
    each time it is made): for each layer [key rows, value rows] [capacity, kv_heads, d] to
    write new positions into, and [key heads, value heads] [1, kv_heads, capacity, d] to
    attend over (scripted.decoder_layer's `cache`)."""

    layers: list[list[torch.Tensor]] = field(default_factory=list)

    @classmethod
    def of(cls, kv: KVBuffer) -> "CacheViews":
        return cls([[keys, values, keys.permute(1, 0, 2).unsqueeze(0),
                     values.permute(1, 0, 2).unsqueeze(0)]
                    for keys, values in zip(kv.keys.unbind(0), kv.values.unbind(0))])


def header_parameter_bytes(gguf: Path, kernel: str) -> int:
    """The `parameter_bytes` a target (the whole vocabulary) loaded from `gguf` with `kernel`
    will hold, from the file's header alone (what `pairs --check` sizes before loading): each
    fused matrix on the tiled kernel where `q4k.tiled_bits` sends it (`kernel` Q4K), else as
    int8 rows; the embedding as int8 rows; the output matrix like a fused one (the embedding's
    rows where the file ties them)."""
    _, arch, tensors = opened(gguf)

    def matrix(parts: list) -> int:
        outputs, inputs = sum(int(part.shape[1]) for part in parts), int(parts[0].shape[0])
        types = [part.tensor_type for part in parts]
        bits = tiled_bits(types, outputs) if kernel == linear.Q4K else None
        return (tile_bytes(outputs, inputs, bits) if bits
                else linear.flat_bytes(outputs, inputs, linear.rows_kernel(kernel)))

    total = sum(matrix([tensors[name] for name, _ in parts])
                for layer in range(arch.layers) for parts in fused_parts(arch, layer).values())
    embed = tensors["token_embd.weight"]
    rows, columns = int(embed.shape[1]), int(embed.shape[0])
    head = tensors.get("output.weight")
    return (total + rows * columns + 4 * rows
            + (matrix([head]) if head is not None
               else linear.flat_bytes(rows, columns, linear.rows_kernel(kernel))))


def head_linear(tensors: dict[str, torch.Tensor], vocab: torch.Tensor | None,
                reduce_range: bool, kernel: str = linear.FBGEMM,
                tiles: dict[str, torch.Tensor] | None = None) -> Linear:
    """The output matrix, or only its rows of a reduced vocabulary; the whole matrix on a
    tiled kernel where `tiles` holds it (q4k.file_tiles)."""
    rows, scale = tensors["head.rows"], tensors["head.scale"]
    kept = linear_of(tiles or {}, "head", int(rows.shape[0])) if vocab is None else None
    if kept is not None:
        return kept
    if vocab is not None:
        rows, scale = rows[vocab.clamp_max(rows.shape[0] - 1)], scale[vocab.clamp_max(rows.shape[0] - 1)]
    return FlatLinear(rows.contiguous(), scale.contiguous(), None, reduce_range,
                      linear.rows_kernel(kernel))
