"""The GPU measurement cannot rot: scripts/gpu_measure.sh's dry run runs every phase of
`specchat bench campaign` (scale, pair, llama) on this CPU with tiny models and publishes the
tables, so a renamed option or a removed module fails here, not on a lent GPU. Also: the
real plan measures what the GPU issue asks (bf16, pytest -m gpu, quantized and spread
targets, llama.cpp with a GGUF draft), and the published tables mark each target."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specchat.bench.gpu.campaign import STEPS, Plan, campaign_pairs, dry_plan, step_record
from specchat.bench.gpu.publish import step_sections, verdict

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dry_config(tmp_path_factory) -> Path:
    """Pairs tiny, tiny-ngram (torch) and gguf-plain (a tiny GGUF), as the dry run needs."""
    from tiny import build_tokenizer, write_models_toml
    from tiny_gguf import save_tiny_gguf

    root = tmp_path_factory.mktemp("gpu-dry")
    toml = write_models_toml(root)
    target, _ = save_tiny_gguf(root, build_tokenizer(), name="target.gguf")
    toml.write_text(toml.read_text() + f'\n[pairs.gguf-plain]\ntarget = "{target}"\nk = 0\n')
    return toml


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.skipif(sys.platform != "linux", reason="the device machine and its script are Linux")
def test_the_gpu_measurement_runs_every_phase_on_a_cpu_and_publishes_its_tables(dry_config,
                                                                                 tmp_path):
    pytest.importorskip("llama_cpp", reason="the llama phase needs llama-cpp-python")
    base = tmp_path / "dry"
    env = dict(os.environ, DRY_CONFIG=str(dry_config), DRY_BASE=str(base),
               PYTHON=sys.executable)
    done = subprocess.run(["bash", "scripts/gpu_measure.sh", "dry-run"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    steps = {r["step"]: r for out in ("out1", "out3", "out4") for r in read(base / out / "results.jsonl")}
    plan = dry_plan(Plan(base, "tiny", "tiny-ngram", "gguf-plain"))
    assert set(steps) == {s.name for phase in STEPS.values() for s in phase(plan)}
    for name, record in steps.items():
        if name in ("standard-8bit", "standard-4bit"):  # bitsandbytes needs CUDA: one line, exit 2
            assert record["exit"] == 2 and "needs a CUDA GPU" in record["report"]["stderr"]
            assert "Traceback" not in record["report"]["stderr"]
        else:
            assert record["exit"] == 0, (name, record["report"])
    assert "total" in steps["standard-tiny"]["report"] and "sweep" in steps["llama-profile"]["report"]
    kinds = [r["kind"] for r in read(base / "out1" / "scale.jsonl")]
    assert kinds.count("model") == 4 and kinds.count("spec") == 2 and "copy" in kinds
    published = (base / "benchmarks.md").read_text()
    assert "<!-- gpu-results:start -->" in published and "### standard-tiny" in published
    raw = next((base / "results").glob("*.jsonl"))
    assert len(read(raw)) == len(steps) + len(kinds)


def test_the_real_plan_measures_bf16_the_gpu_tests_and_every_target_variant(tmp_path):
    plan = Plan(tmp_path)
    argv = {s.name: s.argv for phase in STEPS.values() for s in phase(plan)}
    assert "--collect-only" not in argv["pytest-gpu"] and "--tiny" not in argv["scale"]
    assert argv["standard-smollm2-135m-torch"][argv["standard-smollm2-135m-torch"].index("--dtype") + 1] == "bfloat16"
    assert "--limit" not in argv["standard-smollm2-135m-torch"]
    dry = {s.name: s.argv for phase in STEPS.values() for s in phase(dry_plan(plan))}
    assert "--collect-only" in dry["pytest-gpu"] and "--tiny" in dry["scale"]


def test_the_campaign_pairs_derive_quantized_spread_and_gguf_variants_of_the_builtin_pair(tmp_path):
    from specchat.models.config.pairs import load_catalog

    plan = Plan(tmp_path)
    plan.out.mkdir(exist_ok=True)
    plan.campaign_config.write_text(campaign_pairs(plan))
    catalog = load_catalog(plan.campaign_config)
    assert catalog.get("smollm2-135m-torch-8bit").quantization == "8bit"
    assert catalog.get("smollm2-135m-torch-4bit").quantization == "4bit"
    assert catalog.get("smollm2-135m-torch-spread").max_memory is not None
    spec = catalog.get("smollm2-135m-plain-llama-spec")
    assert spec.backend == "llama.cpp" and spec.draft == "builtin:smollm2-135m-draft.gguf"


def test_a_step_record_keeps_the_json_report_or_the_tail_of_the_output():
    from subprocess import CompletedProcess

    from specchat.bench.gpu.campaign import Step

    step = Step("x", ("specchat", "bench", "run"), 10)
    report = step_record(step, CompletedProcess([], 0, '{"total": {"ratios": {}}}', ""), 1.0, "gpu")
    assert report["report"] == {"total": {"ratios": {}}} and report["exit"] == 0
    failed = step_record(step, CompletedProcess([], 2, "partial", "specchat: error: no GPU"), 1.0, "gpu")
    assert failed["report"]["output"] == "partial" and "no GPU" in failed["report"]["stderr"]
    assert step_record(step, None, 10.0, "gpu")["exit"] == 124


def test_the_published_tables_mark_each_target_met_missed_or_not_measured():
    assert verdict(3.2, 3.0) == "3.20 (met, target ≥ 3.0)"
    assert verdict(0.12, 0.10, higher=False).endswith("(MISSED, target ≤ 0.1)")
    assert verdict(None, 2.0) == "not measured"
    entry = {"exit": 0, "seconds": 1, "command": "specchat bench run",
             "report": {"total": {"ratios": {"target/hf": 3.4, "spec/hf_spec": 1.5}}}}
    from unittest import mock

    with mock.patch("specchat.bench.format.format_report", return_value="table"):
        text = "\n".join(step_sections({"standard-x": entry}))
    assert "target-only / transformers generate: 3.40 (met" in text
    assert "speculative / transformers speculation: 1.50 (MISSED" in text
    assert "speculative / target-only: not measured" in text
