"""The int8 forward's own row operations (models/int8/rows.py, rows_kernel.cpp): rope with
attention, the RMS norm and silu(gate) * up compute what torch's operations compute; a
row's result has the same bits whether it came alone or in a batch, at any depth and
thread count; a model on them verifies bit for bit like its single steps and speculates
greedily to the target's own answer; and where they cannot run (no compiler, a failed
check) the load says why in one line and uses torch's operations.

They need a C++ compiler, which `make test` and CI have: in CI a skip is a failure."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from avx2_build import built_for_avx2
from ci_strict import X86

from specchat.models.int8 import native, rows, scripted

pytestmark = [pytest.mark.skipif(not rows.native_rows(), reason="the row operations cannot "
                                 f"run here: {rows.why_not_here()}"),
              pytest.mark.required_in_ci(when=X86)]

from specchat.engine import Decoder, ModelDrafter, Settings  # noqa: E402
from specchat.models.int8 import convert  # noqa: E402
from specchat.models.int8.model import Int8Model, Rope  # noqa: E402
from test_int8 import PROMPT, committed, files, singles_then_verifies  # noqa: E402, F401 - a fixture

HEADS, KV_HEADS = 6, 2


def qkv_rows(count: int, head_dim: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(count, (HEADS + 2 * KV_HEADS) * head_dim, generator=generator) * 2


def attended(qkv: torch.Tensor, head_dim: int, chunks: list[int], native_rows: bool,
             threads: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """(attention of qkv's rows fed in `chunks` of rows, the key rows it wrote)."""
    total = qkv.shape[0]
    rope = Rope(head_dim, 10000.0)
    keys, values = torch.zeros(total, KV_HEADS, head_dim), torch.zeros(total, KV_HEADS, head_dim)
    views = [keys.permute(1, 0, 2).unsqueeze(0), values.permute(1, 0, 2).unsqueeze(0)]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out, start = [], 0
        for n in chunks:
            out.append(scripted.compiled("attend_rows")(
                qkv[start:start + n], rope.at(start, start + n), keys, values, views[0],
                views[1], start, HEADS, KV_HEADS, head_dim, native_rows))
            start += n
    finally:
        torch.set_num_threads(before)
    return torch.cat(out), keys


@pytest.mark.parametrize("head_dim", [32, 24])  # 24: a tail past the 16-float groups
def test_attention_computes_what_torchs_operations_compute(head_dim):
    qkv = qkv_rows(60, head_dim)
    got, got_keys = attended(qkv, head_dim, [50, 1, 9], True)
    want, want_keys = attended(qkv, head_dim, [50, 1, 9], False)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got_keys, want_keys, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("depth", [0, 37, 300])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_row_attends_with_the_same_bits_alone_or_in_a_batch(depth, threads):
    """The verify's guarantee: rows after `depth` in one call of 8 equal the same rows fed
    one call each (on 2 threads), whatever the thread count of the batched call."""
    qkv = qkv_rows(depth + 8, 32, seed=depth)
    batch, _ = attended(qkv, 32, [depth, 8] if depth else [8], True, threads)
    alone, _ = attended(qkv, 32, ([depth] if depth else []) + [1] * 8, True)
    assert torch.equal(batch[depth:], alone[depth:])


@pytest.mark.parametrize("width", [64, 72])
def test_the_norm_and_the_activation_compute_what_torch_computes_row_by_row(width):
    generator = torch.Generator().manual_seed(width)
    x = torch.randn(5, width, generator=generator) * 3
    x[0, :4] = torch.tensor([-120.0, 120.0, -90.0, 90.0])  # exp's clamps: nothing overflows
    weight = torch.randn(width, generator=generator)
    norm = scripted.compiled("norm")
    gated = scripted.compiled("gated")
    torch.testing.assert_close(norm(x, weight, 1e-6, True), norm(x, weight, 1e-6, False),
                               rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(gated(x, True), gated(x, False), rtol=1e-5, atol=1e-5)
    assert torch.equal(norm(x, weight, 1e-6, True)[3:4], norm(x[3:4].clone(), weight, 1e-6, True))
    assert torch.equal(gated(x, True)[3:4], gated(x[3:4].clone(), True))


@pytest.fixture(scope="module")
def avx2_rows(tmp_path_factory):
    """rows_kernel.cpp built for AVX2 alone, under torch.ops.specchat_rows_avx2
    (tests/avx2_build.py)."""
    yield from built_for_avx2(rows.SOURCE, scripted.ROW_SCHEMAS, "specchat_rows_avx2",
                              tmp_path_factory.mktemp("rows-avx2"))


@pytest.mark.parametrize("head_dim", [128, 24])  # 24: a tail past the 16-float groups
def test_the_avx2_build_gives_this_cpus_bits(avx2_rows, head_dim):
    """Its 16 partial sums in two 8-float registers add up in the one-register tree: the
    attention of 40 rows (keys written, depths 1 to 40), the norm and the activation (its
    clamps' ends included) equal this CPU's build bit for bit."""
    builds = [torch.ops.specchat, avx2_rows]
    qkv = qkv_rows(40, head_dim, seed=head_dim)
    turns = torch.view_as_real(Rope(head_dim, 10000.0).at(0, 40)).contiguous()
    results = []
    for ops in builds:
        keys, values = torch.zeros(40, KV_HEADS, head_dim), torch.zeros(40, KV_HEADS, head_dim)
        attended = ops.rope_attend(qkv, turns, keys, values, 0, HEADS, KV_HEADS, head_dim)
        results.append((attended, keys))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
    x = torch.randn(3, 1000, generator=torch.Generator().manual_seed(5)) * 4
    x[0, :4] = torch.tensor([-120.0, 120.0, -88.5, 87.5])
    weight = torch.randn(1000, generator=torch.Generator().manual_seed(6))
    assert torch.equal(builds[0].rms_norm(x, weight, 1e-6), builds[1].rms_norm(x, weight, 1e-6))
    assert torch.equal(builds[0].silu_mul(x), builds[1].silu_mul(x))


def test_softmax_weights_are_exact_enough_for_sharp_and_flat_scores():
    """The kernel's own e^x: a query that matches one key (a sharp softmax) and one that
    matches none (a flat one) both land within float32's rounding of torch's."""
    head_dim = 32
    qkv = qkv_rows(20, head_dim)
    qkv[:, :HEADS * head_dim] *= 40  # scores in the hundreds: e^x near its clamp
    torch.testing.assert_close(attended(qkv, head_dim, [20], True)[0],
                               attended(qkv, head_dim, [20], False)[0], rtol=1e-4, atol=1e-4)
    qkv[:, :HEADS * head_dim] = 0.0  # every score 0: the values' plain mean
    torch.testing.assert_close(attended(qkv, head_dim, [20], True)[0],
                               attended(qkv, head_dim, [20], False)[0], rtol=1e-5, atol=1e-6)


# --- a model on them -------------------------------------------------------------------


def on_rows(path: Path, native_rows: bool = True) -> Int8Model:
    found = convert.converted(path)
    return Int8Model(found.arch, found.tensors, native_rows=native_rows)


@pytest.mark.parametrize("name", ["llama", "qwen2"])
@pytest.mark.parametrize("depth", [3, 40])
def test_a_verify_row_on_the_row_operations_equals_the_single_step_bit_for_bit(files, name,
                                                                               depth):
    singles, verifies = singles_then_verifies(on_rows(files[name]), depth, rows=12)
    for n, rows_out in enumerate(verifies, start=1):
        assert torch.equal(rows_out, singles[:n]), f"a verify of {n} rows parted from single steps"


def test_the_model_computes_the_same_function_on_either_operations(files):
    ids = torch.tensor(PROMPT * 3)
    got = on_rows(files["qwen2"]).forward(ids, keep=len(ids))
    want = on_rows(files["qwen2"], native_rows=False).forward(ids, keep=len(ids))
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() >= 0.9
    assert (got - want).abs().max() < 0.05 * want.abs().max()


@pytest.mark.parametrize("k", [2, 5])
def test_greedy_speculation_on_the_row_operations_equals_target_only(files, k):
    target, draft = on_rows(files["llama"]), on_rows(files["draft"])

    plain, _ = committed(Decoder(target, None, set()), PROMPT, Settings(k=0), 60)
    spec, found = committed(Decoder(target, ModelDrafter(draft), set()), PROMPT, Settings(k=k), 60)
    assert spec == plain
    assert any(r.accepted for r in found) and any(r.rejected for r in found)


# --- where they cannot run -------------------------------------------------------------


def said_when_not_native() -> list[str]:
    """What `native_rows` says as it answers False (its cached reason cleared around it)."""
    rows.why_not_here.cache_clear()
    said: list[str] = []
    try:
        assert rows.native_rows(said.append) is False
    finally:
        rows.why_not_here.cache_clear()
    return said


def test_a_failed_check_is_said_in_one_line_and_leaves_torchs_operations(monkeypatch):
    monkeypatch.setattr(rows, "check_example", lambda: (True, False))
    assert said_when_not_native() == ["the row operations cannot run here (a row's result depended on the rows "
                    "beside it): torch's instead"]


def test_no_compiler_is_said_in_one_line(monkeypatch, tmp_path):
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(rows, "library_folder", lambda: tmp_path / "rows-unbuilt")
    said = said_when_not_native()
    assert said[0].startswith("compiling the row operations")
    assert said[1] == ("the row operations cannot run here (no C++ compiler (c++ or g++) on "
                       "PATH): torch's instead")
    with pytest.raises(native.KernelUnavailable, match="no C\\+\\+ compiler"):
        rows.rows_library()


def test_the_backend_loads_a_model_on_the_row_operations_where_they_run(files, monkeypatch):
    from specchat.models.backend_int8 import Int8Backend
    from specchat.models.config.pairs import PairConfig
    from specchat.models.config.refs import parse_ref
    from specchat.models.backend import LoadRequest

    def loaded_target() -> Int8Model:
        pair = PairConfig(name="rows", target=str(files["qwen2"]), backend="int8")
        request = LoadRequest(pair, "cpu", "rows", torch.float32, "", 2, 2)
        return Int8Backend().load_target(parse_ref(str(files["qwen2"])), request).raw

    assert loaded_target().native_rows is True
    monkeypatch.setattr(rows, "check_example", lambda: (False, True))
    rows.why_not_here.cache_clear()
    try:
        assert loaded_target().native_rows is False
    finally:
        rows.why_not_here.cache_clear()
