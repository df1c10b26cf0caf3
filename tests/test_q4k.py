"""The Q4_K kernel (models/int8/q4k.py, q4k_kernel.cpp): its product is the GGUF file's own
Q4_K values times the rows (gguf's de-quantizer is the reference), a row's result never
depends on the rows computed with it (and would with one scale for the batch), a model
whose Q4_K matrices run on it verifies bit for bit like its single steps and computes the
float model's function, and greedy speculation on it is the target's own answer. Its AVX2
path gives its AVX-512 path's bits, and its 16-bit sums hold the largest weights times the
largest activations.

It needs AVX2 with FMA and a C++ compiler: elsewhere these skip, and in CI on a CPU with
those flags the skip is a failure (tests/ci_strict.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from avx2_build import AVX_VNNI, built_for_avx2
from ci_strict import X86

from specchat.models.device.hardware import cpu_flags
from specchat.models.int8 import native, q4k

pytestmark = [pytest.mark.skipif(not q4k.q4k_multiplies(), reason="the tiled kernels cannot run "
                                 f"here: {q4k.why_not_here() if q4k.NEEDED_FLAGS <= cpu_flags() else 'no AVX2 with FMA'}"),
              pytest.mark.required_in_ci(when=X86 and q4k.NEEDED_FLAGS <= cpu_flags())]

from specchat.engine import Decoder, ModelDrafter, Settings  # noqa: E402
from specchat.models.int8 import convert, linear, scripted  # noqa: E402
from specchat.models.int8.model import Int8Model  # noqa: E402
from test_int8 import committed, singles_then_verifies  # noqa: E402

PROMPT = [5, 17, 42, 99, 7, 250, 13, 64, 128, 31]


def exact_rows(count: int, inputs: int, seed: int = 2) -> torch.Tensor:
    """Rows the kernel's own rounding leaves as they are: integers in [-127, 127], each run
    of 256 with a 127 (its magnitude), times a power of two."""
    generator = torch.Generator().manual_seed(seed)
    rows = torch.randint(-127, 128, (count, inputs), generator=generator).float()
    rows[:, ::q4k.SUPER] = 127.0
    return rows * 2.0 ** -5


def test_the_product_is_the_files_q4k_values_times_the_rows():
    """Against gguf's own de-quantizer (an independent reading of the format): 48 outputs,
    three tiles of 16, over three super-blocks."""
    raw, values = q4k.example_rows(48, 3 * q4k.SUPER, seed=7)
    x = exact_rows(5, 3 * q4k.SUPER)
    got = q4k.TiledLinear(q4k.repack(raw), 48)(x)
    torch.testing.assert_close(got, (x.double() @ values.double().T).float(), rtol=1e-5,
                               atol=1e-4)


def test_the_q6k_product_is_the_files_q6k_values_times_the_rows():
    """The same for Q6_K (6-bit weights, a signed scale per 16 inputs, an offset of 32)."""
    raw, values = q4k.example_rows(48, 3 * q4k.SUPER, seed=12, bits=6)
    x = exact_rows(5, 3 * q4k.SUPER)
    got = q4k.TiledLinear(q4k.repack_q6k(raw), 48, None, 6)(x)
    torch.testing.assert_close(got, (x.double() @ values.double().T).float(), rtol=1e-5,
                               atol=1e-4)


def test_q6k_values_are_read_as_ggml_reads_them():
    raw, values = q4k.example_rows(16, q4k.SUPER, seed=13, bits=6)
    q, scales, d = q4k.q6k_values(raw)
    mine = d[..., None] * scales.astype(np.float32).repeat(16, -1) * (q.astype(np.float32) - 32)
    np.testing.assert_allclose(mine.reshape(16, -1), values.numpy(), rtol=1e-6)


def test_rows_that_are_not_integers_lose_only_their_rounding_to_8_bits():
    raw, values = q4k.example_rows(32, 2 * q4k.SUPER, seed=8)
    x = torch.randn(4, 2 * q4k.SUPER, generator=torch.Generator().manual_seed(3))
    got = q4k.TiledLinear(q4k.repack(raw), 32)(x)
    want = x @ values.T
    assert (got - want).abs().max() < 0.02 * want.abs().max()


def test_each_run_of_256_inputs_is_rounded_over_its_own_magnitude():
    """llama.cpp's Q8_K granularity: a large value in one run leaves the other run's rounding
    alone (with one scale for the row, the small run would round to zeros)."""
    raw, values = q4k.example_rows(16, 2 * q4k.SUPER, seed=11)
    x = torch.zeros(1, 2 * q4k.SUPER)
    x[0, 0] = 1000.0
    x[0, q4k.SUPER:] = torch.randn(q4k.SUPER, generator=torch.Generator().manual_seed(5)) * 0.01
    got = q4k.TiledLinear(q4k.repack(raw), 16)(x).double()
    want = x.double() @ values.double().T
    second_run = x[:, q4k.SUPER:].double() @ values[:, q4k.SUPER:].double().T
    assert (got - want).abs().max() < 0.02 * second_run.abs().max()


def test_a_q4k_linear_knows_its_shape():
    raw, _ = q4k.example_rows(32, 3 * q4k.SUPER)
    matrix = q4k.TiledLinear(q4k.repack(raw), 32)
    assert (matrix.outputs, matrix.inputs) == (32, 3 * q4k.SUPER)
    assert matrix.weight_bytes == 2 * 3 * q4k.TILE_BLOCK_BYTES


def test_the_bias_and_the_residual_are_added():
    raw, values = q4k.example_rows(16, q4k.SUPER, seed=9)
    x, bias, residual = exact_rows(2, q4k.SUPER), torch.randn(16), torch.randn(2, 16)
    plain = q4k.TiledLinear(q4k.repack(raw), 16)(x)
    got = q4k.TiledLinear(q4k.repack(raw), 16, bias)(x, residual)
    torch.testing.assert_close(got, plain + bias + residual)


@pytest.mark.parametrize("bits", [4, 6])
def test_a_rows_result_never_depends_on_the_rows_beside_it(bits):
    """Every batch size from 1 to 20 (past the 8 rows a pass keeps in registers), each row
    equal to the same row computed alone."""
    raw, _ = q4k.example_rows(64, 2 * q4k.SUPER, seed=10, bits=bits)
    matrix = q4k.TiledLinear((q4k.repack if bits == 4 else q4k.repack_q6k)(raw), 64, None, bits)
    x = torch.randn(20, 2 * q4k.SUPER, generator=torch.Generator().manual_seed(4)) * 3
    alone = torch.cat([matrix(x[i:i + 1]) for i in range(20)])
    for n in range(1, 21):
        assert torch.equal(matrix(x[:n]), alone[:n]), f"a batch of {n} rows parted from single rows"


@pytest.fixture(scope="module")
def avx2_path(tmp_path_factory):
    """q4k_kernel.cpp built for AVX2 alone, under torch.ops.specchat_avx2 (tests/avx2_build.py)."""
    yield from built_for_avx2(q4k.SOURCE, scripted.TILED_SCHEMAS, "specchat_avx2",
                              tmp_path_factory.mktemp("avx2"))


@pytest.fixture(scope="module")
def avx_vnni_path(tmp_path_factory):
    """q4k_kernel.cpp built for AVX2 with AVX-VNNI, under torch.ops.specchat_avx_vnni."""
    yield from built_for_avx2(q4k.SOURCE, scripted.TILED_SCHEMAS, "specchat_avx_vnni",
                              tmp_path_factory.mktemp("avx-vnni"), AVX_VNNI)


AVX2_PATHS = ["avx2_path", pytest.param("avx_vnni_path", marks=pytest.mark.required_in_ci(
    when=X86 and "avx_vnni" in cpu_flags()))]
"""The fixtures of the kernel's 8-lane paths (a test takes each by name). The AVX-VNNI build
compiles everywhere but runs only on a CPU with AVX-VNNI: required in CI only there."""


def both_paths(other_path, bits: int) -> list:
    """The Q4_K (`bits` 4) or Q6_K product of this machine's build and of another build."""
    name = "q4k_linear" if bits == 4 else "q6k_linear"
    return [getattr(torch.ops.specchat, name), getattr(other_path, name)]


@pytest.mark.parametrize("path", AVX2_PATHS)
@pytest.mark.parametrize("bits", [4, 6])
def test_the_avx2_paths_give_the_avx512_paths_bits(request, path, bits):
    """Exact integer sums and the same float operations lane by lane: every batch of 1 to 12
    rows (past the 8 a pass keeps in registers), large and small values, bit for bit."""
    raw, _ = q4k.example_rows(64, 3 * q4k.SUPER, seed=15, bits=bits)
    tiles = (q4k.repack if bits == 4 else q4k.repack_q6k)(raw)
    x = torch.randn(12, 3 * q4k.SUPER, generator=torch.Generator().manual_seed(6)) * 3
    x[:, 300] = 1e4
    native_build, other_build = both_paths(request.getfixturevalue(path), bits)
    for n in range(1, 13):
        assert torch.equal(other_build(x[:n], tiles, 64), native_build(x[:n], tiles, 64)), n


def largest_weights(bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """32 outputs over two super-blocks whose every weight is its type's largest (Q4_K: 15,
    scales and mins 63; Q6_K: 63, scales 127): the tiles and their float values."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    raw, _ = q4k.example_rows(32, 2 * q4k.SUPER, seed=14, bits=bits)
    blocks = raw.reshape(32, 2, -1)
    if bits == 4:
        blocks[..., 4:] = 0xFF
    else:
        blocks[..., :192], blocks[..., 192:208] = 0xFF, 127
    raw = blocks.reshape(32, -1)
    kind = GGMLQuantizationType.Q4_K if bits == 4 else GGMLQuantizationType.Q6_K
    values = torch.from_numpy(dequantize(raw, kind).reshape(32, -1).astype(np.float32))
    return (q4k.repack if bits == 4 else q4k.repack_q6k)(raw), values


@pytest.mark.parametrize("path", AVX2_PATHS)
@pytest.mark.parametrize("bits", [4, 6])
def test_the_16_bit_sums_hold_the_largest_weights_times_the_largest_activations(request, path,
                                                                                 bits):
    """The AVX2 path adds maddubs' 16-bit pair sums in 16 bits (8 groups of Q4_K's, 2 of
    Q6_K's) before widening: with every weight and every activation at its largest, each
    path still computes the product."""
    tiles, values = largest_weights(bits)
    x = torch.ones(3, 2 * q4k.SUPER)
    x[1] = -1.0
    x[2, ::2] = -1.0
    want = (x.double() @ values.double().T).float()
    for build in both_paths(request.getfixturevalue(path), bits):
        torch.testing.assert_close(build(x, tiles, 32), want, rtol=1e-5, atol=1e-3)


def test_without_a_compiler_the_kernel_says_so(monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(native.KernelUnavailable, match="no C\\+\\+ compiler"):
        native.compile_command(q4k.SOURCE, Path("/nonexistent/q4k.so"))


def test_a_fused_matrix_of_mixed_types_stays_on_int8_rows():
    """Q4_K_M stores q and k as Q4_K but v as Q6_K in half the layers: their fused matrix
    has no tiled kernel (one kernel call per fused matrix), so it keeps its int8 rows."""
    from gguf import GGMLQuantizationType as Kind

    q4, _ = q4k.example_rows(16, q4k.SUPER)
    q6, _ = q4k.example_rows(16, q4k.SUPER, bits=6)
    assert q4k.tiled("0.qkv", [Kind.Q4_K, Kind.Q4_K, Kind.Q6_K], [q4, q4, q6]) == {}
    assert set(q4k.tiled("0.qkv", [Kind.Q4_K, Kind.Q4_K], [q4, q4])) == {"0.qkv"}
    assert set(q4k.tiled("0.down", [Kind.Q6_K], [q6])) == {"0.down" + q4k.SUFFIX_Q6K}
    assert q4k.tiled("0.down", [Kind.Q8_0], [q6]) == {}


def test_repacking_refuses_rows_that_fill_no_whole_tile():
    raw, _ = q4k.example_rows(24, q4k.SUPER)
    with pytest.raises(ValueError, match="multiple of 16"):
        q4k.repack(raw)


# --- a model on it ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def q4k_file(tmp_path_factory) -> dict:
    """A 2-layer Qwen2 GGUF in a Q4_K_M file's types (hidden 256; Q4_K attention and gate/up,
    Q6_K down and output matrices), its float model, and that model in float32 as a draft
    (whose int8 rows round otherwise, so it is mostly accepted)."""
    from tiny import build_tokenizer
    from tiny_gguf import write_gguf, write_q4k_qwen2_gguf

    root = tmp_path_factory.mktemp("q4k")
    tokenizer = build_tokenizer()
    path, model = write_q4k_qwen2_gguf(tokenizer, root / "q4k-qwen2.gguf")
    draft = write_gguf(model, tokenizer, root / "draft.gguf", architecture="qwen2")
    return {"path": path, "model": model, "draft": draft}


def on_q4k(path: Path) -> Int8Model:
    found = convert.converted(path)
    return Int8Model(found.arch, found.tensors, kernel=linear.Q4K, tiles=q4k.file_tiles(path))


def test_every_q4k_and_q6k_matrix_of_the_file_runs_on_its_kernel(q4k_file):
    model = on_q4k(q4k_file["path"])
    bits = [[each.bits for each in layer.linears()] for layer in model.layers]
    assert all(isinstance(each, q4k.TiledLinear) for layer in model.layers for each in layer.linears())
    assert bits == [[4, 4, 4, 6]] * 2  # qkv, o, gate_up on Q4_K; down on Q6_K
    assert isinstance(model.head, q4k.TiledLinear) and model.head.bits == 6


def test_pairs_check_sizes_an_int8_target_as_the_loaded_model_holds_it(q4k_file, tmp_path):
    """`header_parameter_bytes` (what `pairs --check` shows before loading) is what the loaded
    model holds: on the Q4_K kernel (tiles for its Q4_K and Q6_K matrices), on fbgemm (int8
    rows), and for a file whose output matrix is its embedding."""
    from tiny import build_tokenizer
    from tiny_gguf import build_qwen2, write_qwen2_gguf

    from specchat.models.int8.model import header_parameter_bytes

    path = q4k_file["path"]
    found = convert.converted(path)
    on_rows = Int8Model(found.arch, found.tensors, kernel=linear.FBGEMM).parameter_bytes
    assert header_parameter_bytes(path, linear.Q4K) == on_q4k(path).parameter_bytes < on_rows
    assert header_parameter_bytes(path, linear.FBGEMM) == on_rows
    tokenizer = build_tokenizer()
    tied = write_qwen2_gguf(build_qwen2(len(tokenizer), tied=True), tokenizer,
                            tmp_path / "tied.gguf")
    found = convert.converted(tied)
    for kernel in (linear.Q4K, linear.FBGEMM):  # float32 matrices: rows on either
        assert header_parameter_bytes(tied, kernel) == Int8Model(
            found.arch, found.tensors, kernel=linear.FBGEMM).parameter_bytes


@pytest.mark.parametrize("depth", [3, 40])
def test_a_verify_row_on_the_q4k_kernel_equals_the_single_step_bit_for_bit(q4k_file, depth):
    singles, verifies = singles_then_verifies(on_q4k(q4k_file["path"]), depth, rows=12)
    for n, rows in enumerate(verifies, start=1):
        assert torch.equal(rows, singles[:n]), f"a verify of {n} rows parted from single steps"


def batch_rounded_tiled_linear(x: torch.Tensor, tiles: torch.Tensor, outputs: int, bits: int,
                               base: torch.Tensor | None) -> torch.Tensor:
    """`scripted.tiled_linear` fed rows rounded to 8 bits over the whole batch's magnitude
    (what a dynamic quantization picks) in place of each run's own."""
    step = x.abs().amax().clamp_min(1e-30) / 127.0
    op = torch.ops.specchat.q6k_linear if bits == 6 else torch.ops.specchat.q4k_linear
    y = op(torch.round(x / step) * step, tiles, outputs)
    return y if base is None else y + base


def test_with_one_rounding_for_the_whole_batch_a_verify_parts_from_single_steps(q4k_file,
                                                                                monkeypatch):
    """The property above is each row's own rounding: rounded over the batch, rows change
    with the rows beside them."""
    monkeypatch.setattr(scripted, "SCRIPTED", False)
    monkeypatch.setattr(scripted, "tiled_linear", batch_rounded_tiled_linear)
    singles, verifies = singles_then_verifies(on_q4k(q4k_file["path"]), 3, rows=12)
    assert any(not torch.equal(rows, singles[:n]) for n, rows in enumerate(verifies, start=1))


def test_the_q4k_model_computes_the_float_models_function(q4k_file):
    """The weights are exactly the Q4_K values, so only the rows' rounding to 8 bits parts
    the logits from transformers' float32 forward: the same top token at most positions."""
    model = on_q4k(q4k_file["path"])
    ids = torch.tensor(PROMPT * 2)
    got = model.forward(ids, keep=len(ids))
    with torch.no_grad():
        want = q4k_file["model"](ids.unsqueeze(0)).logits[0]
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() >= 0.8  # random heads: near-ties
    assert (got - want).abs().max() < 0.1 * want.abs().max()


@pytest.mark.parametrize("k", [2, 5])
def test_greedy_speculation_on_a_q4k_target_equals_target_only(q4k_file, k):
    """The split a CPU with AVX-512 VNNI runs: the target's Q4_K matrices on the kernel, the
    draft on fbgemm; the target's answer is the same drafted or not."""
    target = on_q4k(q4k_file["path"])
    found = convert.converted(q4k_file["draft"])
    draft = Int8Model(found.arch, found.tensors, kernel=linear.FBGEMM)

    plain, _ = committed(Decoder(target, None, set()), PROMPT, Settings(k=0), 60)
    spec, rounds = committed(Decoder(target, ModelDrafter(draft), set()), PROMPT, Settings(k=k), 60)
    assert spec == plain
    assert any(r.accepted for r in rounds) and any(r.rejected for r in rounds)


def test_the_check_fails_on_a_wrong_product(monkeypatch):
    """`q4k_multiplies` (which lets a large target onto the kernel) checks the product's
    values, not only that the call returns."""
    monkeypatch.setattr(scripted, "SCRIPTED", False)
    monkeypatch.setattr(scripted, "tiled_linear",
                        lambda x, tiles, outputs, bits, base: torch.zeros(x.shape[0], outputs))
    q4k.why_not_here.cache_clear()
    try:
        assert q4k.q4k_multiplies() is False
        assert q4k.why_not_here() == "its product failed the check"
    finally:
        q4k.why_not_here.cache_clear()


def test_a_file_the_int8_backend_cannot_read_is_sized_a_byte_a_parameter(tmp_path):
    """`pairs --check` still sizes a target the int8 backend refuses (here: rope scaling it
    does not run); loading it is what says why, in one line."""
    from tiny import build_model, build_tokenizer
    from tiny_gguf import write_gguf

    from specchat.commands.model_facts import int8_weight_bytes

    tokenizer = build_tokenizer()
    path = write_gguf(build_model(len(tokenizer)), tokenizer, tmp_path / "yarn.gguf",
                      rope_scaling_type="yarn")
    assert int8_weight_bytes(path, "target", 12345, lambda _: None) == 12345
