"""llama.cpp never repacks weights on a CPU with AMX, where its AMX kernels crash the process
(models/llamacpp/repack.py): specchat's own llama.cpp models, the bindings' `Llama` the
bench compares with, and llama.cpp's programs are all told so, and the label says it.
Elsewhere repacking stays on. The CPU's flags are faked; the last test runs the built-in
4-bit model on llama.cpp on whatever CPU this is (it crashed on a Sapphire Rapids before)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make test installs it)")

from specchat.bench.llama_programs import (BENCH, BenchProgramArm, Programs,  # noqa: E402
                                           Setup, SpeculativeProgramArm)
from specchat.models.llamacpp.repack import NOT_REPACKED, repack_allowed  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
AMX_CPU = {"avx2", "avx512f", "avx512_vnni", "amx_tile", "amx_int8", "amx_bf16"}
AVX512_CPU = {"avx2", "avx512f", "avx512_vnni", "avx512_bf16"}


@pytest.fixture(scope="module")
def gguf(tmp_path_factory) -> Path:
    from tiny import build_tokenizer
    from tiny_gguf import save_tiny_gguf

    path, _ = save_tiny_gguf(tmp_path_factory.mktemp("repack"), build_tokenizer(), name="t.gguf")
    return path


def test_repacking_is_off_on_a_cpu_with_amx_and_on_elsewhere():
    assert not repack_allowed(AMX_CPU) and not repack_allowed({"avx2", "amx_tile"})
    assert repack_allowed(AVX512_CPU) and repack_allowed({"avx2"}) and repack_allowed(set())


@pytest.mark.parametrize("flags, repacks", [(AMX_CPU, False), (AVX512_CPU, True)])
def test_a_llamacpp_model_asks_llamacpp_to_repack_only_where_it_may_and_says_so(
        gguf, fake_cpu, monkeypatch, flags, repacks):
    from specchat.models.backend_llamacpp import llamacpp_label
    from specchat.models.llamacpp.model import LlamaCppModel, bindings

    fake_cpu(flags)
    lib, asked = bindings(), []
    load = lib.llama_model_load_from_file

    def recording(path, params):
        asked.append(params.use_extra_bufts)
        return load(path, params)

    monkeypatch.setattr(lib, "llama_model_load_from_file", recording)
    model = LlamaCppModel(gguf, threads=1)
    assert asked == [repacks]
    assert (NOT_REPACKED in llamacpp_label(model)) is not repacks


@pytest.mark.parametrize("flags, repacks", [(AMX_CPU, False), (AVX512_CPU, True)])
def test_the_bindings_llama_the_bench_races_repacks_only_where_it_may(gguf, fake_cpu, flags, repacks):
    import llama_cpp

    from specchat.models.llamacpp.baselines import open_llama

    fake_cpu(flags)
    llm = open_llama(gguf, threads=1, n_ctx=64)
    assert llm.model_params.use_extra_bufts is repacks
    assert llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts  # defaults restored


@pytest.mark.parametrize("flags, said", [(AMX_CPU, True), (AVX512_CPU, False)])
def test_llamacpps_programs_are_told_not_to_repack_on_a_cpu_with_amx(fake_cpu, tmp_path, flags, said):
    fake_cpu(flags)
    setup = Setup(target=tmp_path / "t.gguf", threads=2, context=512)
    programs = Programs(tmp_path)
    bench = BenchProgramArm(programs, setup).command(40, 63)
    speculative = SpeculativeProgramArm("k", "label", programs, setup, None, []).command("hi", 8)
    assert ("--repack" in bench and bench[bench.index("--repack") + 1] == "0") is said
    assert ("--no-repack" in speculative) is said
    assert Path(bench[0]).name == BENCH


@pytest.mark.slow
def test_the_builtin_model_answers_a_long_prompt_on_llamacpp_on_this_cpu():
    """A prompt of 100+ tokens is one batched forward: on a Sapphire Rapids it crashed
    (SIGSEGV) while llama.cpp repacked the weights for its AMX kernels."""
    prompt = "Summarise this in one line: " + "The quick brown fox jumps over the lazy dog. " * 12
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "specchat", "run", "--pair", "smollm2-135m-plain",
                           "--max-new-tokens", "4", prompt], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip()
