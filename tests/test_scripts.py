"""Every script in scripts/ runs here (the rule: a script is tested or lives in the package):
the distillation prompt generators rewrite the shipped prompt sets byte for byte, the
lookup bound replays answers with its oracle, the verify-cost comparison and the GGUF
draft check run on tiny models, and the AVX2 model holds specchat, torch and fbgemm to AVX2.
(scripts/gpu_measure.sh: tests/test_gpu_campaign.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"


def run_script(name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(SCRIPTS / name), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_every_script_in_scripts_is_run_by_a_test():
    tested = {"make_distill_prompts.py", "make_distill_prompts_more.py", "lookup_bound.py",
              "verify_costs.py", "gguf_draft_check.py", "gpu_measure.sh", "int8_quality.py",
              "as_avx2.py"}
    here = Path(__file__).read_text() + (ROOT / "tests" / "test_gpu_campaign.py").read_text()
    assert {p.name for p in SCRIPTS.iterdir() if p.is_file()} == tested
    assert all(f'"{name}"' in here or f"scripts/{name}" in here for name in tested)


@pytest.mark.parametrize("name", sorted(p.name for p in SCRIPTS.glob("*.py")))
def test_every_python_script_imports_from_anywhere_without_running(name, tmp_path):
    """Importing a script (as a GPU run's tooling or a test would) only defines things: it
    neither fails outside the repository nor writes a file (the prompt generators once ran
    on import and overwrote the shipped sets)."""
    code = (f"import importlib.util, sys; sys.path.insert(0, {str(SCRIPTS)!r}); "
            f"spec = importlib.util.spec_from_file_location('script', {str(SCRIPTS / name)!r}); "
            "spec.loader.exec_module(importlib.util.module_from_spec(spec))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and list(tmp_path.iterdir()) == []


AS_AVX2 = """
import sys
sys.path.insert(0, {scripts!r})
import as_avx2
as_avx2.hold_to_avx2({avx_vnni})
import torch
from pathlib import Path
from specchat.models.backend_int8 import int8_support
from specchat.models.device.hardware import cpu_flags
from specchat.models.int8 import native
support = int8_support(engines=["fbgemm"])
print(sorted(f for f in cpu_flags() if f.startswith(("avx512", "amx"))))
print(support.why, support.activation_bits, support.target_kernel)
print(torch.backends.cpu.get_cpu_capability())
print([flag for flag in native.compile_command(Path("a.cpp"), Path("a.so")) if flag.startswith("-march")])
"""


@pytest.mark.skipif(not {"avx2", "fma"} <= __import__("specchat.models.device.hardware",
                                                      fromlist=["cpu_flags"]).cpu_flags(),
                    reason="an AVX2 model needs an x86 CPU with AVX2 and FMA")
def test_the_avx2_model_holds_specchats_choices_torch_and_the_compiler_to_avx2():
    """Whatever this CPU has beyond AVX2, specchat sees none of it (the Q4_K kernel's AVX2
    path, fbgemm's 7-bit activations), torch's kernels run at its AVX2 level (set before
    torch loads), and specchat's C++ compiles for AVX2 alone."""
    assert_the_model_chooses(as_avx2_model(avx_vnni=False), "AVX2", "haswell")


def as_avx2_model(avx_vnni: bool) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", AS_AVX2.format(scripts=str(SCRIPTS),
                                                                avx_vnni=avx_vnni)],
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=120)


def assert_the_model_chooses(done: subprocess.CompletedProcess, path: str, march: str) -> None:
    """AS_AVX2's lines: no AVX-512 or AMX flag seen, the Q4_K kernel on `path` with fbgemm at
    7 bits, torch at AVX2, specchat's C++ for -march=`march`."""
    assert done.returncode == 0, done.stderr
    flags, why, capability, compiled = done.stdout.splitlines()
    assert flags == "[]"
    assert why.endswith(" 7 q4k") and f"Q4_K kernel ({path})" in why
    assert capability == "AVX2"
    assert compiled == f"['-march={march}']"


def test_the_avx_vnni_model_keeps_avx_vnni_for_the_q4k_kernel_and_fbgemm_at_7_bits():
    """An Alder Lake's choices: the Q4_K kernel's AVX-VNNI path (-march=alderlake), fbgemm
    still at AVX2 and 7-bit activations; on a CPU without AVX-VNNI, one line and no run."""
    from specchat.models.device.hardware import cpu_flags

    done = as_avx2_model(avx_vnni=True)
    if "avx_vnni" not in cpu_flags():
        assert done.returncode != 0 and "no AVX-VNNI" in done.stderr.strip().splitlines()[-1]
        return
    assert_the_model_chooses(done, "AVX-VNNI", "alderlake")


def test_the_avx2_model_runs_any_specchat_command():
    done = run_script("as_avx2.py", "locate", "cache", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("as on an AVX2-only CPU") and done.stdout.strip()


@pytest.mark.parametrize("name, shipped", [
    ("make_distill_prompts.py", "specchat/distill/prompts.jsonl"),
    ("make_distill_prompts_more.py", "specchat/distill/prompts-more.jsonl")])
def test_the_distill_prompt_generators_write_the_shipped_sets_byte_for_byte(name, shipped, tmp_path):
    out = tmp_path / "prompts.jsonl"
    done = run_script(name, str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == (ROOT / shipped).read_bytes()


def test_the_lookup_bound_replays_each_answer_with_its_oracle(tiny_config, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"e{i}", "category": "extract", "prompt": text}) + "\n"
                               for i, text in enumerate(["Repeat: the cat sat on the mat.",
                                                         "Copy this: a b c d e f"])))
    done = run_script("lookup_bound.py", "--pair", "tiny-ngram", "--config", str(tiny_config),
                      "--prompts", str(prompts), "--max-new-tokens", "12")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["id"] for r in rows] == ["e0", "e1"]
    assert all(1 <= r["tau_bound"] <= 13 and r["oracle_rounds"] <= r["tokens"] for r in rows)
    costed = run_script("lookup_bound.py", "--pair", "tiny-ngram", "--config", str(tiny_config),
                        "--prompts", str(prompts), "--max-new-tokens", "12", "--measure")
    assert costed.returncode == 0, costed.stderr
    rows = [json.loads(line) for line in costed.stdout.splitlines() if line.startswith("{")]
    assert rows[0]["v"]["1"] == 1.0 and all(0 < r["speedup_bound"] <= r["tau_bound"] for r in rows[1:])


def test_the_oracle_proposes_the_longest_run_after_any_earlier_suffix():
    sys.path.insert(0, str(SCRIPTS))
    try:
        from lookup_bound import longest_lookup_run, oracle_rounds
    finally:
        sys.path.remove(str(SCRIPTS))
    assert longest_lookup_run([5, 1, 2, 3, 9, 5], [1, 2, 3, 4], k=8) == 3
    assert longest_lookup_run([5, 1, 2], [7], k=8) == 0
    # nothing follows an earlier 3, so round one commits "1" alone; round two copies "2 3"
    assert oracle_rounds([1, 2, 3], [1, 2, 3], k=8) == 2


def test_the_lookup_bound_charges_each_oracle_round_its_verify_cost():
    """Where a verify of n tokens costs more than a plain step (a CPU), copying pays less:
    two rounds copying 3 tokens each (plus one target token) at v(4) = 2 steps save half."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        from lookup_bound import given_costs, speedup_bound
    finally:
        sys.path.remove(str(SCRIPTS))
    flat = given_costs("1,1,1,1")
    assert speedup_bound([3, 3], flat) == pytest.approx(4.0)
    assert speedup_bound([3, 3], given_costs("1,1.5,1.8,2")) == pytest.approx(2.0)
    assert speedup_bound([0, 0, 0], given_costs("1,2")) == pytest.approx(1.0)  # nothing copied


def test_verify_costs_compares_both_backends_on_a_tiny_gguf_pair(tmp_path):
    pytest.importorskip("llama_cpp", reason="the llama.cpp column needs llama-cpp-python")
    from tiny import build_tokenizer
    from tiny_gguf import save_tiny_gguf

    target, _ = save_tiny_gguf(tmp_path, build_tokenizer(), name="target.gguf")
    toml = tmp_path / "models.toml"
    toml.write_text(f'[pairs.g]\ntarget = "{target}"\ndraft = "ngram"\nk = 3\ndtype = "float32"\n')
    done = run_script("verify_costs.py", "--pair", "g", "--config", str(toml), "--repeats", "1",
                      "--context", "24", "--threads", "1", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert set(report) == {"torch float32", "llama.cpp"}


def test_the_gguf_draft_check_runs_on_a_tiny_distilled_draft(tmp_path):
    pytest.importorskip("llama_cpp", reason="the check loads the GGUF in llama.cpp")
    from gguf_tiny import write_tiny_draft, write_tiny_gguf

    env_cache = os.environ.get("SPECCHAT_CACHE_DIR")
    target = write_tiny_gguf(tmp_path / "target", layers=3)
    draft = write_tiny_draft(target, tmp_path / "draft", int8=False, vocab_every=0)
    done = run_script("gguf_draft_check.py", "--draft", str(draft), "--positions", "20",
                      "--type", "f32")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "greedy proposals equal at" in done.stdout and env_cache == os.environ.get("SPECCHAT_CACHE_DIR")


def test_specchats_lookup_with_perfect_lengths_only_copies_what_its_latest_match_predicts():
    """Of two earlier "1 2", the latest went on "4", an older one "3 9": the oracle copies
    "3 9" in one round; specchat's lookup (the latest match) copies nothing in the first
    round and "9" after "2 3" in the second, however well it chose its proposal lengths."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        from lookup_bound import drafter_runs, oracle_runs
    finally:
        sys.path.remove(str(SCRIPTS))
    prompt, answer = [1, 2, 3, 9, 0, 1, 2, 4, 0, 1, 2], [3, 9, 6]
    assert oracle_runs(prompt, answer, k=8) == [2]
    assert drafter_runs(prompt, answer, k=8, max_ngram=2, min_ngram=2) == [0, 1]
    assert drafter_runs([1, 2, 3, 1, 2], [3, 1, 2, 5], k=2, max_ngram=2, min_ngram=2) == [2, 0]  # k caps a run


def test_the_int8_quality_script_compares_each_backend_with_the_float_model(tmp_path):
    """On a tiny GGUF: the float reference answers, int8 and llama.cpp read its answers, and
    the agreement of each is a fraction of the answer's tokens, per category and overall."""
    pytest.importorskip("llama_cpp")
    from gguf_tiny import write_tiny_gguf

    target = write_tiny_gguf(tmp_path / "model")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"c{i}", "category": cat, "prompt": text}) + "\n"
                               for i, (cat, text) in enumerate([("chat", "Say hello."),
                                                                ("code", "def add(a, b):")])))
    out = tmp_path / "quality.json"
    done = run_script("int8_quality.py", "--target", str(target), "--prompts", str(prompts),
                      "--max-new-tokens", "12", "--out", str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert [row["id"] for row in result["rows"]] == ["c0", "c1"]
    overall = result["agreement"]["all"]
    assert overall["tokens"] == sum(row["tokens"] for row in result["rows"]) > 0
    assert all(0 <= overall[name] <= 1 for name in ("int8", "llama.cpp"))
    assert set(result["agreement"]) == {"all", "chat", "code"}
    assert result["labels"]["int8"].startswith("int8") and "llama.cpp" in result["labels"]["llama.cpp"]
