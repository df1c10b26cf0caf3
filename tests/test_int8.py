"""The int8 backend (models/int8/) on tiny random Llama and Qwen2 models written as GGUF files:
a verify row's logits equal the single step's bit for bit at every batch size and depth
(and would not without the pinned range), the forward computes the model's function (the
same logits as transformers where the weights are exactly int8), the conversion is cached
and a damaged cache is rebuilt, and speculative decoding on it is lossless (greedy identity,
χ² on sampled first tokens). Skipped where this torch has no fbgemm kernels (not x86; on x86
in CI that skip is a failure: tests/ci_strict.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

import pytest
import torch
from ci_strict import X86

from specchat.models.backend_int8 import int8_support

pytestmark = [pytest.mark.skipif(not int8_support().usable, reason=int8_support().why),
              pytest.mark.required_in_ci(when=X86)]

from specchat.chat.decoding import drafter_for  # noqa: E402
from specchat.engine import Decoder, ModelDrafter, Round, SamplingParams, Settings  # noqa: E402
from specchat.models.int8 import convert, linear, scripted  # noqa: E402
from specchat.models.int8 import model as int8_model  # noqa: E402
from specchat.models.int8.model import Int8Model  # noqa: E402

PROMPT = [5, 17, 42, 99, 7, 250, 13, 64, 128, 31]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    """A 2-layer Llama GGUF with a 1-layer draft of it, a Qwen2 GGUF, and their float models."""
    from test_llamacpp import truncated
    from tiny import build_tokenizer
    from tiny_gguf import (build_llama3, build_qwen2, save_tiny_gguf, write_gguf,
                           write_llama3_gguf, write_qwen2_gguf)

    root = tmp_path_factory.mktemp("int8")
    tokenizer = build_tokenizer()
    llama, llama_model = save_tiny_gguf(root, tokenizer, name="llama.gguf")
    draft = write_gguf(truncated(llama_model), tokenizer, root / "draft.gguf")
    qwen_model = build_qwen2(len(tokenizer), eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"))
    qwen = write_qwen2_gguf(qwen_model, tokenizer, root / "qwen2.gguf")
    llama3_model = build_llama3(len(tokenizer))
    llama3 = write_llama3_gguf(llama3_model, tokenizer, root / "llama3.gguf")
    return {"llama": llama, "llama_model": llama_model, "draft": draft, "qwen2": qwen,
            "qwen2_model": qwen_model, "llama3": llama3, "llama3_model": llama3_model,
            "root": root, "tokenizer": tokenizer}


def int8(path: Path, **options) -> Int8Model:
    found = convert.converted(path)
    return Int8Model(found.arch, found.tensors, **options)


def singles_then_verifies(model: Int8Model, depth: int, rows: int = 16):
    """(logits of `rows` tokens fed one at a time after `depth`, [logits of a verify of the
    first n of them at once, for n = 1..rows])."""
    ids = torch.randint(0, 300, (depth + rows,), generator=torch.Generator().manual_seed(depth))
    model.reset()
    model.forward(ids[:depth])
    singles = torch.cat([model.forward(ids[depth + j:depth + j + 1]) for j in range(rows)])
    verifies = []
    for n in range(1, rows + 1):
        model.crop(depth)
        verifies.append(model.forward(ids[depth:depth + n], keep=n))
    return singles, verifies


# --- exact by construction -----------------------------------------------------------


KERNELS = [linear.FBGEMM, linear.ONEDNN]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name", ["llama", "qwen2"])
@pytest.mark.parametrize("depth", [3, 70])
def test_a_verify_row_equals_the_single_step_bit_for_bit(files, monkeypatch, name, depth, kernel):
    monkeypatch.setattr(int8_model, "PREFILL_CHUNK", 32)  # depth 70 is read in three chunks
    singles, verifies = singles_then_verifies(int8(files[name], kernel=kernel), depth)
    for n, rows in enumerate(verifies, start=1):
        assert torch.equal(rows, singles[:n]), f"a verify of {n} rows parted from single steps"


def batch_scaled_onednn_linear(x: torch.Tensor, packed: torch.Tensor, columns: torch.Tensor,
                               unit: torch.Tensor, zero: torch.Tensor,
                               base: Optional[torch.Tensor]) -> torch.Tensor:
    """`scripted.onednn_linear` with one magnitude for the whole batch (what a dynamic
    quantization picks) in place of each row's own."""
    magnitude = x.abs().amax().clamp_min(1e-30)
    rows = torch.div(x, magnitude).mul_(127.0).round_().to(torch.int8)
    sums = torch.ops.onednn.qlinear_pointwise(rows, 1.0, 0, packed, unit, zero, None, 1.0, 0,
                                              torch.float32, "none", [], "")
    y = sums * columns * magnitude
    return y if base is None else y + base


def test_on_onednn_without_each_rows_own_scale_a_verify_parts_from_single_steps(files,
                                                                                  monkeypatch):
    """oneDNN's verify is exact because each row is scaled and rounded on its own: scaled by
    the batch, rows change with the rows beside them."""
    monkeypatch.setattr(scripted, "SCRIPTED", False)
    monkeypatch.setattr(scripted, "onednn_linear", batch_scaled_onednn_linear)
    singles, verifies = singles_then_verifies(int8(files["llama"], kernel=linear.ONEDNN), 3)
    assert any(not torch.equal(rows, singles[:n]) for n, rows in enumerate(verifies, start=1))


def test_without_the_pinned_range_a_verify_parts_from_single_steps(files, monkeypatch):
    """The property above is the pins' doing: without them fbgemm picks its range from the
    batch, and rows change with the rows beside them."""
    monkeypatch.setattr(linear, "PIN_VALUES", ())
    monkeypatch.setattr(linear, "PINS", 0)
    singles, verifies = singles_then_verifies(int8(files["llama"]), 3)
    assert any(not torch.equal(rows, singles[:n]) for n, rows in enumerate(verifies, start=1))


def test_the_onednn_check_fails_on_a_wrong_product(monkeypatch):
    """`linear.onednn_multiplies` (which lets a large target onto oneDNN) checks the
    product's values, not only that the call returns."""
    def zeros(x, *args):
        return torch.zeros(x.shape[0], args[1].shape[0])

    monkeypatch.setattr(scripted, "SCRIPTED", False)
    monkeypatch.setattr(scripted, "onednn_linear", zeros)
    linear.onednn_multiplies.cache_clear()
    try:
        assert linear.onednn_multiplies() is False
    finally:
        linear.onednn_multiplies.cache_clear()


# --- the right function ----------------------------------------------------------------


def float_flat_linear(x: torch.Tensor, buffer: torch.Tensor, view: torch.Tensor,
                      packed: torch.classes.quantized.LinearPackedParamsBase,
                      base: Optional[torch.Tensor], reduce_range: bool) -> torch.Tensor:
    """`scripted.flat_linear`, but multiplying by the int8 weights de-quantized, in float32."""
    weight = torch.ops.quantized.linear_unpack(packed)[0].dequantize()
    y = torch.matmul(x, weight[:, : x.size(1)].t())
    if base is None:
        return y
    return y + base


def float_linears(monkeypatch):
    """Every int8 product multiplies by its own int8 weights de-quantized, in float32 (the
    layers run as Python, calling it): the forward then differs from the float model only
    by the weights' rounding."""
    monkeypatch.setattr(scripted, "SCRIPTED", False)
    monkeypatch.setattr(scripted, "flat_linear", float_flat_linear)


def int8_exact(model):
    """`model` with every matrix rounded to int8 rows (then the conversion loses nothing)."""
    from specchat.models.blocks.int8_rows import quantize_rows

    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) or isinstance(module, torch.nn.Embedding):
                rows, scale = quantize_rows(module.weight)
                module.weight.copy_(rows.float() * scale[:, None])
    return model


@pytest.mark.parametrize("name", ["llama", "qwen2", "llama3"])
def test_the_forward_is_the_models_own_function(files, monkeypatch, tmp_path, name):
    """Rope order, llama 3's rope factors, q/k/v biases, grouped heads, tied embeddings: with
    weights that int8 holds exactly and float matmuls, the logits are transformers' own."""
    from tiny_gguf import write_gguf, write_llama3_gguf, write_qwen2_gguf

    model = int8_exact(files[f"{name}_model"])
    write = {"qwen2": write_qwen2_gguf, "llama3": write_llama3_gguf}.get(name, write_gguf)
    path = write(model, files["tokenizer"], tmp_path / f"{name}-exact.gguf")
    float_linears(monkeypatch)
    got = int8(path).forward(torch.tensor(PROMPT), keep=len(PROMPT))
    want = model(torch.tensor([PROMPT])).logits[0].float()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_torchscript_computes_the_python_layers_bit_for_bit(files, monkeypatch, name, kernel):
    ids = torch.arange(10, 40)
    compiled = int8(files[name], kernel=kernel).forward(ids, keep=len(ids))
    monkeypatch.setattr(scripted, "SCRIPTED", False)
    assert torch.equal(int8(files[name], kernel=kernel).forward(ids, keep=len(ids)), compiled)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_int8_activations_keep_the_float_models_choices(files, name, kernel):
    """With the real kernels (8- or 7-bit rows), the logits stay close to the float model's
    and mostly pick the same token (a tiny random model: wide, noisy activations)."""
    from specchat.models.backend_int8 import VNNI_FLAGS
    from specchat.models.device.hardware import cpu_flags

    if kernel == linear.ONEDNN and not cpu_flags() & VNNI_FLAGS:
        # without VNNI oneDNN's 8-bit products saturate: no target multiplies on it here
        assert int8_support().kernel_for(10 ** 10) == linear.FBGEMM
        return
    ids = torch.arange(10, 60)
    got = int8(files[name], kernel=kernel).forward(ids, keep=len(ids))
    want = files[f"{name}_model"](ids[None]).logits[0].float()
    assert ((got - want).norm() / want.norm()).item() < 0.15
    assert (got.argmax(-1) == want.argmax(-1)).float().mean().item() >= 0.75


# --- the cache of converted weights ---------------------------------------------------


def test_the_conversion_is_cached_and_a_damaged_cache_is_converted_again(files, monkeypatch):
    path = files["root"] / "cached.gguf"
    path.write_bytes(files["llama"].read_bytes())
    calls = []
    real = convert.convert
    monkeypatch.setattr(convert, "convert", lambda *a: (calls.append(a), real(*a))[1])
    first = convert.converted(path).tensors["0.qkv.rows"].clone()
    assert torch.equal(convert.converted(path).tensors["0.qkv.rows"], first)
    assert len(calls) == 1  # the second load read the cache
    cached = convert.cached_file(path)
    cached.write_bytes(cached.read_bytes()[: cached.stat().st_size // 3])  # a cut file
    notes = []
    again = convert.converted(path, notes.append)
    assert len(calls) == 2 and torch.equal(again.tensors["0.qkv.rows"], first)
    assert any("damaged" in note for note in notes)


def test_a_replaced_gguf_files_int8_cache_goes_when_the_new_one_is_built(files, tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv("SPECCHAT_CACHE_DIR", str(tmp_path / "cache"))
    old_install, new_install = tmp_path / "old-env" / "model.gguf", tmp_path / "new-env" / "model.gguf"
    for path in (old_install, new_install):
        path.parent.mkdir()
        path.write_bytes(files["llama"].read_bytes())
    convert.converted(old_install)
    old_cache = convert.cached_file(old_install).parent
    old_install.unlink()  # the old environment is removed
    convert.converted(new_install)
    assert sorted((tmp_path / "cache" / "int8").iterdir()) == [convert.cached_file(new_install).parent]
    assert not old_cache.exists()


@pytest.mark.parametrize("metadata, words", [
    ({"rope_scaling_type": "yarn"}, "rope scaling 'yarn'"),
    ({"rope_dimension_count": 8}, "rope on 8 of each head's 16 dimensions")])
def test_a_rope_int8_cannot_compute_stays_on_llamacpp_and_is_named(files, metadata, words):
    """Header facts decide before anything converts: `auto` keeps such a file on llama.cpp,
    and asking for int8 is a one-line error naming the rope."""
    import dataclasses

    from specchat.errors import PairError
    from specchat.models import adapters
    from specchat.models.config.pairs import PairConfig
    from tiny_gguf import write_gguf

    path = files["root"] / f"{words.split()[2]}.gguf"
    write_gguf(files["llama_model"], files["tokenizer"], path, **metadata)
    pair = PairConfig(name="r", target=str(path), draft="ngram", k=3)
    assert adapters.choose_backends(pair, "cpu").target in ("llama.cpp", "torch")
    with pytest.raises(PairError, match=words):
        adapters.choose_backends(dataclasses.replace(pair, backend="int8"), "cpu")


def test_a_file_int8_cannot_read_is_one_line_naming_it(files):
    from specchat.errors import ModelNotFound

    text = files["root"] / "notes.gguf"
    text.write_text("not a model\n")
    with pytest.raises(ModelNotFound, match="notes.gguf"):
        convert.converted(text)


# --- lossless on the int8 backend -------------------------------------------------------


def committed(decoder: Decoder, prompt, settings, n, generator=None):
    rounds = [e for e in decoder.generate(prompt, settings, n, generator) if isinstance(e, Round)]
    return [t for r in rounds for t in r.committed], rounds


@pytest.fixture(scope="module")
def config(files) -> Path:
    toml = files["root"] / "models.toml"
    toml.write_text(f'''[pairs.int8]
target = "{files['llama']}"
draft = "{files['draft']}"
k = 3
backend = "int8"

[pairs.int8-ngram]
target = "{files['qwen2']}"
draft = "ngram"
k = 4
backend = "int8"

[pairs.mismatch]
target = "{files['llama']}"
draft = "{files['qwen2'].parent / 'other.gguf'}"
backend = "int8"
''')
    return toml


@pytest.fixture(scope="module")
def loaded(config):
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    cache = {}

    def load(name: str):
        if name not in cache:
            cache[name] = load_pair(load_catalog(config).get(name))
        return cache[name]

    return load


@pytest.mark.parametrize("k", [1, 3, 6])
def test_greedy_speculative_equals_target_only_on_int8(loaded, k):
    pair = loaded("int8")
    assert pair.backends["target"].startswith("int8") and pair.backends["draft"].startswith("int8")
    plain, _ = committed(Decoder(pair.target, None, set()), PROMPT, Settings(k=0), 60)
    spec, rounds = committed(Decoder(pair.target, drafter_for(pair), set()), PROMPT, Settings(k=k), 60)
    assert spec == plain
    assert any(r.rejected for r in rounds) and any(r.accepted for r in rounds)


@pytest.mark.parametrize("k", [2, 5])
def test_greedy_speculation_on_a_onednn_target_with_an_fbgemm_draft_equals_target_only(files, k):
    """The split a CPU with AMX runs: the target on oneDNN (its flat verify), the draft on
    fbgemm; the target's answer is the same drafted or not."""
    from specchat.engine import ModelDrafter

    target = int8(files["llama"], kernel=linear.ONEDNN)
    draft = int8(files["draft"], kernel=linear.FBGEMM)
    plain, _ = committed(Decoder(target, None, set()), PROMPT, Settings(k=0), 60)
    spec, rounds = committed(Decoder(target, ModelDrafter(draft), set()), PROMPT, Settings(k=k), 60)
    assert spec == plain
    assert any(r.rejected for r in rounds) and any(r.accepted for r in rounds)


def test_greedy_ngram_speculation_on_a_qwen2_target_equals_target_only(loaded):
    pair = loaded("int8-ngram")
    prompt = PROMPT * 3  # repeats, so the lookup proposes
    plain, _ = committed(Decoder(pair.target, None, set()), prompt, Settings(k=0), 60)
    spec, rounds = committed(Decoder(pair.target, drafter_for(pair), set()), prompt, Settings(k=4), 60)
    assert spec == plain and sum(r.drafted for r in rounds) > 0


def test_sampling_on_int8_reproduces_the_target_distribution(files):
    """The first token of a sampled speculative answer follows the target's distribution;
    the draft's own samples fail the same check."""
    from specchat.engine.sampling import to_probs
    from test_llamacpp import chi2_pvalue, first_tokens

    target, draft = int8(files["llama"]), int8(files["draft"])
    params, runs = SamplingParams(temperature=1.0), 1500
    probs = to_probs(target.forward(torch.tensor(PROMPT))[-1], params)
    speculative = first_tokens(Decoder(target, ModelDrafter(draft), set()), 2, params, runs)
    assert chi2_pvalue(speculative, probs) > 1e-3
    draft_alone = first_tokens(Decoder(draft, None, set()), 0, params, runs // 5)
    assert chi2_pvalue(draft_alone, probs) < 1e-6


def test_the_loaded_pair_says_what_computes_and_ends_on_the_files_eos(loaded, files):
    pair = loaded("int8")
    label = pair.backends["target"]
    assert "fbgemm" in label and "llama" in label and f"{int8_support().activation_bits}-bit" in label
    assert "fbgemm" in pair.backends["draft"]  # a tiny target: fbgemm even on AMX
    assert pair.dtype == "int8" and "from llama" in pair.reasons["dtype"]
    assert files["tokenizer"].convert_tokens_to_ids("<|im_end|>") in pair.eos_ids
    assert pair.memory().target_weights > 0 and pair.context_length == 512


def test_an_int8_pair_races_llamacpps_own_speculation_with_the_same_files(loaded, files):
    """bench's llama.cpp programs run the GGUF files the int8 models were converted from:
    llama-speculative-simple with the pair's draft file, llama-bench with its target's."""
    from specchat.bench.llama_programs import Programs, program_arms
    from specchat.bench.llamacpp_arms import program_setup

    pair = loaded("int8")
    arms = program_arms(pair, Programs(Path("/bin")), program_setup(pair), 3)
    assert [a.key for a in arms] == ["lcpp_draft", "llama_bench"]
    command = " ".join(arms[0].command("p", 8))
    assert f"-md {files['draft']}" in command and f"-m {files['llama']}" in command


def test_a_draft_with_another_vocabulary_brings_its_own_tokenizer(files, loaded):
    from tiny import build_tokenizer
    from tiny_gguf import save_tiny_gguf

    save_tiny_gguf(files["qwen2"].parent, build_tokenizer(300), name="other.gguf")
    pair = loaded("mismatch")
    assert pair.draft_tokenizer is not None and len(pair.draft_tokenizer) == 300
    assert pair.backends["draft"].startswith("int8")


def test_threads_follow_the_chat_rule_steps_on_threads_prompts_on_prefill_threads(files, monkeypatch):
    seen = []
    monkeypatch.setattr(int8_model, "use_threads", seen.append)
    model = int8(files["llama"], threads=1, prefill_threads=2)
    model.forward(torch.arange(40))  # a prompt
    model.forward(torch.tensor([5]))  # a step
    model.forward(torch.tensor([5, 6, 7]), keep=3)  # a verify
    assert seen == [2, 1, 1]
    assert dataclasses.is_dataclass(convert.Architecture)


SATURATING = """
import sys, torch
import specchat.models.device.hardware as hardware
hardware.cpu_flags = lambda: {"avx", "avx2", "fma", "f16c", "avx_vnni"}
from specchat.models.backend_int8 import int8_support
from specchat.models.int8 import linear
weight = torch.full((16, 256), 1.0)
x = torch.ones(3, 256)
x[:, 0] = -1.0
got = linear.FlatLinear.of(weight, None, int8_support().reduce_range)(x)
print(int8_support().activation_bits, float((got - x @ weight.T).abs().max()))
"""
"""A CPU with AVX-VNNI and no AVX-512 (Intel's cores since Alder Lake): its flags, and fbgemm
on its AVX2 kernels (FBGEMM_ENABLE_INSTRUCTIONS, set before torch loads), the row of ones
whose 8-bit activations' pair sums (255 x 127 twice) overflow 16 bits."""


def test_fbgemm_on_avx2_kernels_computes_the_product_with_the_activations_the_backend_chose():
    """fbgemm has no AVX-VNNI kernels: where the CPU has AVX-VNNI but no AVX-512 it runs its
    AVX2 ones, whose 16-bit pair sums saturate on 8-bit activations (the product came out
    2.0 for 254), so the backend quantizes to 7 bits there and the product holds."""
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", SATURATING], capture_output=True, text=True,
                          env={**os.environ, "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"})
    assert done.returncode == 0, done.stderr[-800:]
    bits, error = done.stdout.split()
    assert bits == "7" and float(error) < 3.0, done.stdout
