"""The Q4_K kernel (models/int8/q4k.py, q4k_kernel.cpp): its product is the GGUF file's own
Q4_K values times the rows (gguf's de-quantizer is the reference), a row's result never
depends on the rows computed with it (and would with one scale for the batch), a model
whose Q4_K matrices run on it verifies bit for bit like its single steps and computes the
float model's function, and greedy speculation on it is the target's own answer.

It needs AVX-512 with VNNI and a C++ compiler: elsewhere these skip, and in CI on a CPU
with those flags the skip is a failure (tests/ci_strict.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from ci_strict import X86

from specchat.models.device.hardware import cpu_flags
from specchat.models.int8 import q4k

pytestmark = [pytest.mark.skipif(not q4k.q4k_multiplies(), reason="the Q4_K kernel needs "
                                 "AVX-512 VNNI and a C++ compiler"),
              pytest.mark.required_in_ci(when=X86 and q4k.NEEDED_FLAGS <= cpu_flags())]

from specchat.engine import Decoder, ModelDrafter, Round, Settings  # noqa: E402
from specchat.models.int8 import convert, linear, scripted  # noqa: E402
from specchat.models.int8.model import Int8Model  # noqa: E402

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
    got = q4k.Q4KLinear(q4k.repack(raw), 48)(x)
    torch.testing.assert_close(got, (x.double() @ values.double().T).float(), rtol=1e-5,
                               atol=1e-4)


def test_rows_that_are_not_integers_lose_only_their_rounding_to_8_bits():
    raw, values = q4k.example_rows(32, 2 * q4k.SUPER, seed=8)
    x = torch.randn(4, 2 * q4k.SUPER, generator=torch.Generator().manual_seed(3))
    got = q4k.Q4KLinear(q4k.repack(raw), 32)(x)
    want = x @ values.T
    assert (got - want).abs().max() < 0.02 * want.abs().max()


def test_each_run_of_256_inputs_is_rounded_over_its_own_magnitude():
    """llama.cpp's Q8_K granularity: a large value in one run leaves the other run's rounding
    alone (with one scale for the row, the small run would round to zeros)."""
    raw, values = q4k.example_rows(16, 2 * q4k.SUPER, seed=11)
    x = torch.zeros(1, 2 * q4k.SUPER)
    x[0, 0] = 1000.0
    x[0, q4k.SUPER:] = torch.randn(q4k.SUPER, generator=torch.Generator().manual_seed(5)) * 0.01
    got = q4k.Q4KLinear(q4k.repack(raw), 16)(x).double()
    want = x.double() @ values.double().T
    second_run = x[:, q4k.SUPER:].double() @ values[:, q4k.SUPER:].double().T
    assert (got - want).abs().max() < 0.02 * second_run.abs().max()


def test_a_q4k_linear_knows_its_shape():
    raw, _ = q4k.example_rows(32, 3 * q4k.SUPER)
    matrix = q4k.Q4KLinear(q4k.repack(raw), 32)
    assert (matrix.outputs, matrix.inputs) == (32, 3 * q4k.SUPER)
    assert matrix.weight_bytes == 2 * 3 * q4k.TILE_BLOCK_BYTES


def test_the_bias_and_the_residual_are_added():
    raw, values = q4k.example_rows(16, q4k.SUPER, seed=9)
    x, bias, residual = exact_rows(2, q4k.SUPER), torch.randn(16), torch.randn(2, 16)
    plain = q4k.Q4KLinear(q4k.repack(raw), 16)(x)
    got = q4k.Q4KLinear(q4k.repack(raw), 16, bias)(x, residual)
    torch.testing.assert_close(got, plain + bias + residual)


def test_a_rows_result_never_depends_on_the_rows_beside_it():
    """Every batch size from 1 to 20 (past the 8 rows a pass keeps in registers), each row
    equal to the same row computed alone."""
    raw, _ = q4k.example_rows(64, 2 * q4k.SUPER, seed=10)
    matrix = q4k.Q4KLinear(q4k.repack(raw), 64)
    x = torch.randn(20, 2 * q4k.SUPER, generator=torch.Generator().manual_seed(4)) * 3
    alone = torch.cat([matrix(x[i:i + 1]) for i in range(20)])
    for n in range(1, 21):
        assert torch.equal(matrix(x[:n]), alone[:n]), f"a batch of {n} rows parted from single rows"


def test_without_a_compiler_the_kernel_says_so(monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(q4k.KernelUnavailable, match="no C\\+\\+ compiler"):
        q4k.compile_command(q4k.SOURCE, Path("/nonexistent/q4k.so"))


def test_repacking_refuses_rows_that_fill_no_whole_tile():
    raw, _ = q4k.example_rows(24, q4k.SUPER)
    with pytest.raises(ValueError, match="multiple of 16"):
        q4k.repack(raw)


# --- a model on it ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def q4k_file(tmp_path_factory) -> dict:
    """A 2-layer Qwen2 GGUF whose matrices are Q4_K (hidden 256), its float model, and that
    model in float32 as a draft (whose int8 rows round otherwise, so it is mostly accepted)."""
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


def test_every_layer_matrix_of_a_q4k_file_runs_on_the_kernel(q4k_file):
    model = on_q4k(q4k_file["path"])
    assert all(isinstance(each, q4k.Q4KLinear) for layer in model.layers for each in layer.linears())


def singles_then_verifies(model: Int8Model, depth: int, rows: int = 12):
    ids = torch.randint(0, 300, (depth + rows,), generator=torch.Generator().manual_seed(depth))
    model.reset()
    model.forward(ids[:depth])
    singles = torch.cat([model.forward(ids[depth + j:depth + j + 1]) for j in range(rows)])
    verifies = []
    for n in range(1, rows + 1):
        model.crop(depth)
        verifies.append(model.forward(ids[depth:depth + n], keep=n))
    return singles, verifies


@pytest.mark.parametrize("depth", [3, 40])
def test_a_verify_row_on_the_q4k_kernel_equals_the_single_step_bit_for_bit(q4k_file, depth):
    singles, verifies = singles_then_verifies(on_q4k(q4k_file["path"]), depth)
    for n, rows in enumerate(verifies, start=1):
        assert torch.equal(rows, singles[:n]), f"a verify of {n} rows parted from single steps"


def batch_rounded_q4k_linear(x: torch.Tensor, tiles: torch.Tensor, outputs: int,
                             base: torch.Tensor | None) -> torch.Tensor:
    """`scripted.q4k_linear` fed rows rounded to 8 bits over the whole batch's magnitude (what
    a dynamic quantization picks) in place of each row's own."""
    step = x.abs().amax().clamp_min(1e-30) / 127.0
    y = torch.ops.specchat.q4k_linear(torch.round(x / step) * step, tiles, outputs)
    return y if base is None else y + base


def test_with_one_rounding_for_the_whole_batch_a_verify_parts_from_single_steps(q4k_file,
                                                                                monkeypatch):
    """The property above is each row's own rounding: rounded over the batch, rows change
    with the rows beside them."""
    monkeypatch.setattr(scripted, "SCRIPTED", False)
    monkeypatch.setattr(scripted, "q4k_linear", batch_rounded_q4k_linear)
    singles, verifies = singles_then_verifies(on_q4k(q4k_file["path"]), 3)
    assert any(not torch.equal(rows, singles[:n]) for n, rows in enumerate(verifies, start=1))


def test_the_q4k_model_computes_the_float_models_function(q4k_file):
    """The weights are exactly the Q4_K values, so only the rows' rounding to 8 bits parts
    the logits from transformers' float32 forward: the same top token at most positions."""
    model = on_q4k(q4k_file["path"])
    ids = torch.tensor(PROMPT * 2)
    got = model.forward(ids, keep=len(ids))
    with torch.no_grad():
        want = q4k_file["model"](ids.unsqueeze(0)).logits[0]
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() >= 0.9
    assert (got - want).abs().max() < 0.1 * want.abs().max()


@pytest.mark.parametrize("k", [2, 5])
def test_greedy_speculation_on_a_q4k_target_equals_target_only(q4k_file, k):
    """The split a CPU with AVX-512 VNNI runs: the target's Q4_K matrices on the kernel, the
    draft on fbgemm; the target's answer is the same drafted or not."""
    target = on_q4k(q4k_file["path"])
    found = convert.converted(q4k_file["draft"])
    draft = Int8Model(found.arch, found.tensors, kernel=linear.FBGEMM)

    def committed(drafter, settings):
        rounds = [event for event in Decoder(target, drafter, set()).generate(PROMPT, settings, 60)
                  if isinstance(event, Round)]
        return [t for r in rounds for t in r.committed], rounds

    plain, _ = committed(None, Settings(k=0))
    spec, rounds = committed(ModelDrafter(draft), Settings(k=k))
    assert spec == plain
    assert any(r.accepted for r in rounds) and any(r.rejected for r in rounds)


def test_the_check_fails_on_a_wrong_product(monkeypatch):
    """`q4k_multiplies` (which lets a large target onto the kernel) checks the product's
    values, not only that the call returns."""
    monkeypatch.setattr(scripted, "SCRIPTED", False)
    monkeypatch.setattr(scripted, "q4k_linear",
                        lambda x, tiles, outputs, base: torch.zeros(x.shape[0], outputs))
    q4k.why_not_here.cache_clear()
    try:
        assert q4k.q4k_multiplies() is False
        assert q4k.why_not_here() == "its product failed the check"
    finally:
        q4k.why_not_here.cache_clear()
