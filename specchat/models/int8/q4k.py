"""Linears on the GGUF file's own Q4_K weights: half the bytes of int8 rows, and still a
verify whose rows equal single steps bit for bit.

An int8 step of Qwen2.5-Coder-1.5B reads 1.55 GB where llama.cpp's Q4_K_M file reads
1.0 GB, so on a machine without AMX the int8 target decoded at 0.66-0.76x `llama-bench`
(docs/benchmarks.md). llama.cpp's own Q4_K kernels reuse an unpacked weight tile for at most
4 tokens, so its verify of 8 costs 5.8 steps. q4k_kernel.cpp is this module's kernel: the
Q4_K weights as the file has them (d * sc * q - dmin * mn, nothing re-quantized), 16
outputs per tile, the activations rounded to int8 in runs of 256, each over its own
magnitude (llama.cpp's Q8_K granularity), each super-block's sums exact in int32 (the
sub-blocks' products with their scales, and the mins' part), then one float multiply-add
per super-block in one fixed order per output. A row's result therefore never depends on
the rows beside it. It has code paths for AVX-512 VNNI, for AVX2 with FMA, and for AVX2 with
AVX-VNNI (what the compiler targets picks one); for finite rows they give the same bits.

- `kernel_library`: q4k_kernel.cpp compiled once per machine, torch and source into the
  cache, and loaded (native.py);
- `q4k_multiplies`: whether it compiles, loads and computes a small product right here;
- `repack`, `repack_q6k`: a Q4_K or Q6_K tensor's raw rows into the kernel's tiles
  (q4k_kernel.cpp's comments);
- `TiledLinear`: the linear `model.py` calls for a matrix the file stores as Q4_K or Q6_K;
- `file_tiles`: a GGUF file's Q4_K and Q6_K matrices, fused and ordered as `convert.py` fuses and
  orders its int8 ones, repacked once and cached beside them.

Q4_K_M keeps some matrices in Q6_K (half the layers' `ffn_down` and `attn_v`, the output
matrix): the same kernel file multiplies those as the file has them too (`repack_q6k`,
6-bit weights and a signed scale per 16 inputs). A matrix of any other type, or a fused one
whose parts differ (q and k Q4_K beside a Q6_K v), stays int8 rows. Knows nothing about
decoding, tokenizers or the forward pass.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from specchat import paths
import specchat.models.int8.native as native

FORMAT = 2
"""Bumped whenever the cached tiles' layout changes."""
TILE, SUPER, SUB = 16, 256, 32
"""Outputs per tile, inputs per Q4_K super-block, inputs per sub-block."""
Q4K_BLOCK_BYTES = 144
"""A Q4_K super-block in the file: d, dmin (float16), 12 bytes of 6-bit scales and mins,
128 bytes of 4-bit weights."""
TILE_BLOCK_BYTES = SUPER * TILE // 2 + 2 * 8 * TILE + 2 * 4 * TILE
"""One tile's super-block in the kernel's layout (2,432 bytes for 4,096 weights)."""
Q6K_BLOCK_BYTES = 210
"""A Q6_K super-block in the file: 128 bytes of low 4 bits, 64 of high 2 bits, 16 signed
8-bit scales (one per 16 weights), d (float16)."""
Q6_TILE_BLOCK_BYTES = SUPER * TILE // 2 + SUPER * TILE // 4 + 16 * TILE + 4 * TILE
"""One tile's Q6_K super-block in the kernel's layout (3,392 bytes for 4,096 weights)."""
SUFFIX_Q6K = "@q6k"
"""A cached matrix's name suffix when its tiles are Q6_K's (`file_tiles`)."""
SOURCE = Path(__file__).with_name("q4k_kernel.cpp")
KERNEL = "the Q4_K kernel"
"""What the load's lines call it."""
TILES_FILE = "q4k.safetensors"
NEEDED_FLAGS = {"avx2", "fma"}
"""What q4k_kernel.cpp's instructions need (its AVX2 path)."""
WIDE_FLAGS = {"avx512f", "avx512bw", "avx512_vnni"}
"""Where it compiles its AVX-512 VNNI path (one 16-lane instruction where AVX2 takes four)."""
AVX_VNNI_FLAG = "avx_vnni"
"""Where, without AVX-512, its AVX2 path takes AVX-VNNI's dot products (one 8-lane
instruction where AVX2 takes two)."""


def instructions(flags: set[str]) -> str:
    """The kernel's code path on a CPU with these flags, as a label names it."""
    if WIDE_FLAGS <= flags:
        return "AVX-512 VNNI"
    return "AVX-VNNI" if AVX_VNNI_FLAG in flags else "AVX2"


# --- the kernel -------------------------------------------------------------------------


def library_folder() -> Path:
    """Where the compiled kernel lives (native.library_folder)."""
    return native.library_folder(SOURCE, "q4k")


def kernel_library() -> Path:
    """The compiled kernel, built on first use and loaded into torch (`KernelUnavailable`
    where it cannot be)."""
    return native.loaded_library(SOURCE, "q4k", KERNEL, library_folder())


def q4k_multiplies(progress: Callable[[str], None] = lambda _: None) -> bool:
    """Whether the kernel builds, loads and computes a small product right on this CPU (asked
    once, and only for a target that would use it; anything else leaves it on fbgemm).
    `progress` hears that it compiles, the first time on this machine, and why a CPU that
    could run it does not (no compiler, a failed build, a wrong product)."""
    from specchat.models.device.hardware import cpu_flags

    return NEEDED_FLAGS <= cpu_flags() and native.usable(
        library_folder(), KERNEL, why_not_here, "fbgemm's int8 rows instead", progress)


@functools.lru_cache(maxsize=1)
def why_not_here() -> str | None:
    """Why the kernels cannot run on this machine, or None where they build, load and
    compute the check's products right (Q4_K's and Q6_K's); found once per process."""
    x = torch.randint(-127, 128, (3, 2 * SUPER), generator=torch.Generator().manual_seed(1)).float()
    x[:, ::SUPER] = 127.0  # each run's magnitude: its own scale then leaves it as it is
    try:
        kernel_library()
        products = []
        for bits, (raw, values) in ((4, example_rows(32, 2 * SUPER)), (6, example_rows(32, 2 * SUPER, bits=6))):
            tiles = repack(raw) if bits == 4 else repack_q6k(raw)
            products.append((TiledLinear(tiles, 32, None, bits)(x), x @ values.T))
    except Exception as error:  # noqa: BLE001 - any failure means "not here", and says why
        from specchat.errors import one_line

        return one_line(error, 160)
    if not all(torch.allclose(got, want, rtol=1e-5, atol=1e-2) for got, want in products):
        return "its product failed the check"
    return None


def example_rows(outputs: int, inputs: int, seed: int = 0, largest_scale: float = 0.01,
                 bits: int = 4) -> tuple[np.ndarray, torch.Tensor]:
    """Random Q4_K (`bits` 4) or Q6_K (`bits` 6) rows [outputs, inputs / 256 * block bytes],
    their super-block scales below `largest_scale`, and their float values (gguf's own
    de-quantizer): what the check and the tests multiply."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    generator = np.random.default_rng(seed)
    size = Q4K_BLOCK_BYTES if bits == 4 else Q6K_BLOCK_BYTES
    blocks = generator.integers(0, 256, (outputs, inputs // SUPER, size), dtype=np.uint8)
    where = slice(0, 4) if bits == 4 else slice(208, 210)  # d and dmin, or d
    count = where.stop - where.start
    scales = (generator.random((outputs, inputs // SUPER, count // 2)) * largest_scale).astype(np.float16)
    blocks[..., where] = scales.view(np.uint8).reshape(outputs, inputs // SUPER, count)
    raw = blocks.reshape(outputs, -1)
    kind = GGMLQuantizationType.Q4_K if bits == 4 else GGMLQuantizationType.Q6_K
    values = dequantize(raw, kind).reshape(outputs, inputs)
    return raw, torch.from_numpy(values.astype(np.float32))


# --- the layout ---------------------------------------------------------------------------


def scales_and_mins(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K's 12 bytes of 6-bit values [..., 12] -> (scales, mins) [..., 8], as ggml unpacks them."""
    first, second, third = packed[..., 0:4], packed[..., 4:8], packed[..., 8:12]
    scales = np.concatenate([first & 63, (third & 15) | ((first >> 6) << 4)], axis=-1)
    mins = np.concatenate([second & 63, (third >> 4) | ((second >> 6) << 4)], axis=-1)
    return scales.astype(np.uint8), mins.astype(np.uint8)


def repack(raw: np.ndarray) -> torch.Tensor:
    """Q4_K rows as the file stores them [outputs, super-blocks * 144] -> the kernel's tiles
    (one uint8 tensor; q4k_kernel.cpp's comment gives the layout)."""
    outputs = raw.shape[0]
    if outputs % TILE or raw.shape[1] % Q4K_BLOCK_BYTES:
        raise ValueError(f"Q4_K rows [{outputs}, {raw.shape[1]}]: outputs a multiple of {TILE}")
    blocks = raw.reshape(outputs // TILE, TILE, -1, Q4K_BLOCK_BYTES)  # tile, lane, block, bytes
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    dmin = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    scales, mins = scales_and_mins(blocks[..., 4:16])
    packed = blocks[..., 16:].reshape(*blocks.shape[:3], 4, 32)  # 4 chunks of 64 weights
    weights = np.concatenate([packed & 15, packed >> 4], axis=-1)  # chunk: sub-block 2c, 2c + 1
    weights = weights.reshape(*blocks.shape[:3], 32, 8)  # 8-input groups
    nibbles = weights[..., :4] | (weights[..., 4:] << 4)  # lane's 4 bytes: k..k+3 | k+4..k+7
    tiles = [nibbles.transpose(0, 2, 3, 1, 4), scales.transpose(0, 2, 3, 1),
             mins.transpose(0, 2, 3, 1), d.transpose(0, 2, 1).copy().view(np.uint8),
             dmin.transpose(0, 2, 1).copy().view(np.uint8)]
    flat = [np.ascontiguousarray(part).reshape(*part.shape[:2], -1) for part in tiles]
    return torch.from_numpy(np.concatenate(flat, axis=-1).reshape(-1).copy())


def q6k_values(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q6_K rows [outputs, super-blocks * 210] -> (q [outputs, super-blocks, 256] in 0..63,
    scales [outputs, super-blocks, 16] int8, d [outputs, super-blocks] float32), as ggml
    reads them: w = d * scale[i // 16] * (q[i] - 32)."""
    blocks = raw.reshape(raw.shape[0], -1, Q6K_BLOCK_BYTES)
    low = blocks[..., :128].reshape(*blocks.shape[:2], 2, 64)
    high = blocks[..., 128:192].reshape(*blocks.shape[:2], 2, 32)
    q = np.concatenate([(low[..., :32] & 15) | ((high & 3) << 4),
                        (low[..., 32:] & 15) | (((high >> 2) & 3) << 4),
                        (low[..., :32] >> 4) | (((high >> 4) & 3) << 4),
                        (low[..., 32:] >> 4) | (((high >> 6) & 3) << 4)], axis=-1)
    scales = blocks[..., 192:208].view(np.int8)
    d = blocks[..., 208:210].copy().view(np.float16)[..., 0].astype(np.float32)
    return q.reshape(*blocks.shape[:2], SUPER).astype(np.uint8), scales, d


def repack_q6k(raw: np.ndarray) -> torch.Tensor:
    """Q6_K rows as the file stores them [outputs, super-blocks * 210] -> the Q6_K kernel's
    tiles (q4k_kernel.cpp's comment above q6_tile_rows gives the layout)."""
    outputs = raw.shape[0]
    if outputs % TILE or raw.shape[1] % Q6K_BLOCK_BYTES:
        raise ValueError(f"Q6_K rows [{outputs}, {raw.shape[1]}]: outputs a multiple of {TILE}")
    q, scales, d = q6k_values(raw)
    tiles = outputs // TILE
    q = q.reshape(tiles, TILE, -1, 32, 8)  # tile, lane, block, 8-input group, input
    nibbles = (q[..., :4] & 15) | ((q[..., 4:] & 15) << 4)  # [tile, lane, block, 32, 4]
    top = (q >> 4).reshape(tiles, TILE, -1, 16, 2, 2, 4)  # pair of groups, group, half, input
    high = (top[..., 0, 0, :] | (top[..., 0, 1, :] << 2) | (top[..., 1, 0, :] << 4)
            | (top[..., 1, 1, :] << 6))  # [tile, lane, block, 16, 4]
    parts = [nibbles.transpose(0, 2, 3, 1, 4), high.transpose(0, 2, 3, 1, 4),
             scales.reshape(tiles, TILE, -1, 16).transpose(0, 2, 3, 1).view(np.uint8),
             d.reshape(tiles, TILE, -1).transpose(0, 2, 1).copy().view(np.uint8)]
    flat = [np.ascontiguousarray(part).reshape(*part.shape[:2], -1) for part in parts]
    return torch.from_numpy(np.concatenate(flat, axis=-1).reshape(-1).copy())


@dataclass(frozen=True)
class TiledLinear:
    """x -> x W^T (+ bias), or + a residual, on a matrix of Q4_K tiles (`bits` 4) or Q6_K
    tiles (`bits` 6) (module docstring)."""

    tiles: torch.Tensor
    outputs: int
    bias: torch.Tensor | None = None
    bits: int = 4

    @property
    def weight_bytes(self) -> int:
        return int(self.tiles.numel())

    @property
    def inputs(self) -> int:
        block = TILE_BLOCK_BYTES if self.bits == 4 else Q6_TILE_BLOCK_BYTES
        return self.weight_bytes // (self.outputs // TILE) // block * SUPER

    def __call__(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        """x [n, in] float32 -> [n, outputs] (+ bias, + `residual`)."""
        from specchat.models.int8.scripted import compiled

        base = self.bias if residual is None else (residual if self.bias is None
                                                   else residual + self.bias)
        return compiled("tiled_linear")(x, self.tiles, self.outputs, self.bits, base)


# --- a file's Q4_K matrices ----------------------------------------------------------------


def cached_file(gguf: Path) -> Path:
    from specchat.models.gguf.cache import cache_key

    return paths.cache_dir() / "q4k" / f"{cache_key(gguf)}-v{FORMAT}" / TILES_FILE


def file_tiles(gguf: Path, progress: Callable[[str], None] = lambda _: None) -> dict[str, torch.Tensor]:
    """`gguf`'s fused matrices whose every part the file stores as Q4_K, as the kernel's
    tiles under convert.py's names ("3.qkv", "3.gate_up", ...), repacked on first use."""
    from safetensors.torch import load_file

    from specchat.models.config.cache_build import build_once, is_built

    target = cached_file(gguf)
    if not is_built(target.parent):
        progress(f"repacking {gguf.name}'s Q4_K and Q6_K weights for their kernels (first use only)")
    folder = build_once(target.parent, lambda out: write_tiles(gguf, out / TILES_FILE),
                        f"Q4_K tiles of {gguf}", [gguf])
    return load_file(str(folder / TILES_FILE))


def write_tiles(gguf: Path, out: Path) -> None:
    from safetensors.torch import save_file

    from specchat.models.int8.convert import fused_parts, opened

    _, arch, tensors = opened(gguf)
    result: dict[str, torch.Tensor] = {}
    for layer in range(arch.layers):
        for name, parts in fused_parts(arch, layer).items():
            raw = [tensors[part] for part, _ in parts]
            rows = [order(np.asarray(tensor.data)) for tensor, (_, order) in zip(raw, parts)]
            result.update(tiled(f"{layer}.{name}", [tensor.tensor_type for tensor in raw], rows))
    head = tensors.get("output.weight")
    if head is not None:
        result.update(tiled("head", [head.tensor_type], [np.asarray(head.data)]))
    save_file(result, str(out))


def tiled_bits(types: list, outputs: int) -> int | None:
    """The tiled kernel a fused matrix goes to: 4 (Q4_K) or 6 (Q6_K) where all its parts have
    that GGML type and its `outputs` rows make whole tiles; None where it stays int8 rows."""
    from gguf import GGMLQuantizationType

    if len(set(types)) != 1 or outputs % TILE:
        return None
    return {GGMLQuantizationType.Q4_K: 4, GGMLQuantizationType.Q6_K: 6}.get(types[0])


def tile_bytes(outputs: int, inputs: int, bits: int) -> int:
    """Bytes a `TiledLinear` of [outputs, inputs] holds: one kernel block per tile of rows and
    super-block of inputs."""
    block = TILE_BLOCK_BYTES if bits == 4 else Q6_TILE_BLOCK_BYTES
    return outputs // TILE * (inputs // SUPER) * block


def tiled(name: str, types: list, rows: list[np.ndarray]) -> dict[str, torch.Tensor]:
    """A fused matrix's tiles under `name` (Q6_K's under name + SUFFIX_Q6K) where
    `tiled_bits` sends it to a tiled kernel; {} otherwise."""
    bits = tiled_bits(types, sum(part.shape[0] for part in rows))
    if bits == 4:
        return {name: repack(np.concatenate(rows))}
    if bits == 6:
        return {name + SUFFIX_Q6K: repack_q6k(np.concatenate(rows))}
    return {}


def linear_of(tiles: dict[str, torch.Tensor], name: str, outputs: int,
              bias: torch.Tensor | None = None) -> TiledLinear | None:
    """The tiled linear of matrix `name`, on whichever kernel its tiles are for, or None."""
    if name in tiles:
        return TiledLinear(tiles[name], outputs, bias, 4)
    if name + SUFFIX_Q6K in tiles:
        return TiledLinear(tiles[name + SUFFIX_Q6K], outputs, bias, 6)
    return None
