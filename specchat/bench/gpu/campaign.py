"""`specchat bench campaign PHASE --out DIR`: the whole GPU measurement as ordered steps.

Each step is one `python -m specchat ...` (or `python -m pytest ...`) command with its own
time limit, run in priority order inside one budget (a device call lasts at most ten
minutes). Each step's JSON report (or the tail of its output) is appended to
DIR/results.jsonl with its name, command, exit status and seconds; DIR/device.txt says
what ran where (GPU, versions, llama.cpp's offload). The phases:

- `scale`: `bench scale` at the real 1B/8B shapes in bf16, 8-bit and 4-bit
  (DIR/scale.jsonl), then `pytest -m gpu`;
- `pair`: the pair's comparison with transformers (bf16), the same with an 8-bit and a
  4-bit target, a target spread by accelerate under a small `max_memory`, the time
  outside model forwards, the k sweep with the cost model, the n-gram pair, and
  `pairs --check --measure`;
- `llama`: the built-in GGUF on llama.cpp's GPU build: the cost model (v(n) on the GPU),
  target-only and speculative with the draft's GGUF form.

The pairs a phase needs beyond the configuration's (quantized, spread, GGUF draft) are
written to DIR/campaign.toml from the base pair, so the same steps run on the built-in
pair on a GPU and, with `--dry-run`, on a tiny pair on a CPU (tiny shapes, a few tokens,
float32, `pytest --collect-only`): the test suite runs every phase that way, so a renamed
option or module fails a test, not a GPU session. Knows nothing about the device tool.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

PHASES = ("scale", "pair", "llama")


@dataclass(frozen=True)
class Step:
    """One command of a phase and the most seconds it may take."""

    name: str
    argv: tuple[str, ...]
    """Arguments after `python -m`."""
    limit_s: int


@dataclass(frozen=True)
class Plan:
    """What a campaign measures: the real GPU run by default, a tiny CPU run with `dry_run`."""

    out: Path
    pair: str = "smollm2-135m-torch"
    ngram_pair: str = "smollm2-135m-ngram"
    gguf_pair: str = "smollm2-135m-plain"
    config: Path | None = None
    prompts: Path | None = None
    max_new_tokens: int = 96
    dtype: str = "bfloat16"
    sweep_ks: str = "1,2,3,4,5,6"
    quant_limit: int = 10
    shapes: str = "1b,8b"
    quantizations: str = "none,8bit,4bit"
    budget_s: int = 540
    dry_run: bool = False
    python: str = field(default=sys.executable)

    @property
    def campaign_config(self) -> Path:
        return self.out / "campaign.toml"


def dry_plan(plan: Plan) -> Plan:
    """The same steps on a CPU in seconds: tiny shapes, few tokens, float32."""
    return replace(plan, max_new_tokens=8, dtype="float32", sweep_ks="1,2", quant_limit=2,
                   dry_run=True)


def bench_options(plan: Plan, pair: str) -> tuple[str, ...]:
    prompts = ("--prompts", str(plan.prompts)) if plan.prompts else ()
    return ("--pair", pair, "--config", str(plan.campaign_config), "--dtype", plan.dtype,
            "--max-new-tokens", str(plan.max_new_tokens), "--json", *prompts)


def bench(plan: Plan, subcommand: str, pair: str, *more: str,
          limit: int | None = None) -> tuple[str, ...]:
    """A `bench` step's arguments; a dry run answers two prompts whatever the limit."""
    limit = 2 if plan.dry_run else limit
    limits = ("--limit", str(limit)) if limit else ()
    return ("specchat", "bench", subcommand, *bench_options(plan, pair), *limits, *more)


def scale_steps(plan: Plan) -> list[Step]:
    scale = ("specchat", "bench", "scale", "--out", str(plan.out / "scale.jsonl"),
             "--shapes", plan.shapes, "--quant", plan.quantizations,
             "--budget-s", str(max(30, plan.budget_s - 140)))
    if plan.dry_run:
        scale += ("--tiny", "--device", "cpu", "--tokens", "24", "--repeats", "3")
    pytest = ("pytest", "-q", "-m", "gpu", "tests/test_gpu.py", "-p", "no:cacheprovider")
    return [Step("scale", scale, max(30, plan.budget_s - 130)),
            Step("pytest-gpu", pytest + (("--collect-only",) if plan.dry_run else ()), 120)]


def pair_steps(plan: Plan) -> list[Step]:
    pair, few = plan.pair, plan.quant_limit
    return [Step(f"standard-{pair}", bench(plan, "run", pair), 170),
            Step("standard-8bit", bench(plan, "run", f"{pair}-8bit", limit=few), 80),
            Step("standard-4bit", bench(plan, "run", f"{pair}-4bit", limit=few), 80),
            Step("standard-spread", bench(plan, "run", f"{pair}-spread", limit=few), 80),
            Step(f"overhead-{pair}", bench(plan, "overhead", pair, limit=5), 60),
            Step(f"sweep-profile-{pair}", bench(plan, "profile", pair, "--ks", plan.sweep_ks), 150),
            Step(f"standard-{plan.ngram_pair}", bench(plan, "run", plan.ngram_pair, limit=few), 80),
            Step(f"check-{pair}", ("specchat", "pairs", "--config", str(plan.campaign_config),
                                   "--check", pair, "--measure"), 40)]


def llama_steps(plan: Plan) -> list[Step]:
    gguf = plan.gguf_pair
    return [Step("llama-profile", bench(plan, "profile", f"{gguf}-llama-spec", "--ks", plan.sweep_ks),
                 150),
            Step("llama-standard", bench(plan, "run", f"{gguf}-llama"), 120),
            Step("llama-spec", bench(plan, "run", f"{gguf}-llama-spec"), 120)]


STEPS = {"scale": scale_steps, "pair": pair_steps, "llama": llama_steps}


def campaign_pairs(plan: Plan) -> str:
    """models.toml text: the base configuration's pairs plus the variants the phases need."""
    from specchat.models.config.pairs import load_catalog

    catalog = load_catalog(plan.config)
    base, gguf = catalog.get(plan.pair), catalog.get(plan.gguf_pair)
    draft = f'draft = "{base.draft}"\n' if base.draft else ""
    same = f'target = "{base.target}"\n{draft}k = {json.dumps(base.k)}\nbackend = "torch"\n'
    text = plan.config.read_text() + "\n" if plan.config else ""
    text += f'\n[pairs.{plan.pair}-8bit]\n{same}quantization = "8bit"\n'
    text += f'\n[pairs.{plan.pair}-4bit]\n{same}quantization = "4bit"\n'
    spread = 'max_memory = { "0" = "150MiB", "cpu" = "16GiB" }'
    text += f'\n[pairs.{plan.pair}-spread]\n{same}{spread}\n'
    text += f'\n[pairs.{gguf.name}-llama]\ntarget = "{gguf.target}"\nk = 0\nbackend = "llama.cpp"\n'
    text += (f'\n[pairs.{gguf.name}-llama-spec]\ntarget = "{gguf.target}"\n'
             f'draft = "{gguf_draft(base.draft)}"\nk = 3\nbackend = "llama.cpp"\n')
    return text


def gguf_draft(draft: str | None) -> str:
    """The GGUF form of the base pair's draft (built-in drafts have one: NAME.gguf)."""
    if draft and draft.startswith("builtin:") and not draft.endswith(".gguf"):
        return draft + ".gguf"
    return draft or "ngram"


def device_lines(python: str) -> str:
    """What ran where: the GPU, the versions, llama.cpp's GPU offload."""
    probe = ("import torch, transformers, platform\n"
             "cpu = platform.processor() or platform.machine()\n"
             "print('device:', torch.cuda.get_device_name(0) if torch.cuda.is_available() "
             "else f'cpu ({cpu})')\n"
             "print('host cpu:', cpu, '| cores:', __import__('os').cpu_count())\n"
             "print('torch', torch.__version__, '| transformers', transformers.__version__)\n"
             "try:\n import bitsandbytes; print('bitsandbytes', bitsandbytes.__version__)\n"
             "except Exception as e: print('bitsandbytes: not usable', type(e).__name__)\n"
             "from specchat.models.llamacpp.model import missing, gpu_offload\n"
             "gpu = None if missing() else gpu_offload()\n"
             "print('llama.cpp:', missing() or (f'GPU offload to {gpu}' if gpu else 'CPU build'))\n")
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120)
    return (done.stdout + done.stderr[-500:]).strip()


def step_record(step: Step, done: subprocess.CompletedProcess | None, seconds: float,
                device: str) -> dict:
    """The results.jsonl object of one step: its JSON report, or the tail of its output."""
    if done is None:
        return {"step": step.name, "device": device, "exit": 124, "seconds": round(seconds, 1),
                "command": " ".join(step.argv), "report": {"output": "timed out"}}
    text = done.stdout.strip()
    try:
        report = json.loads(text) if text.startswith("{") else {"output": text[-20000:]}
    except ValueError:
        report = {"output": text[-20000:]}
    if done.returncode and "output" in report:
        report["stderr"] = done.stderr[-4000:]
    return {"step": step.name, "device": device, "exit": done.returncode,
            "seconds": round(seconds, 1), "command": " ".join(step.argv), "report": report}


RunHere = Callable[[tuple[str, ...]], subprocess.CompletedProcess]
"""Runs `specchat ARGS` in this process (given by the command line, which owns the CLI)."""


def run_step(step: Step, plan: Plan, limit: float,
             run_here: RunHere | None = None) -> subprocess.CompletedProcess | None:
    """The step's finished process (None: it ran out of time). A dry run given `run_here`
    answers specchat's own steps in this process: its imports are paid once, not per step."""
    if plan.dry_run and run_here is not None and step.argv[0] == "specchat":
        return run_here(step.argv[1:])
    try:
        return subprocess.run([plan.python, "-m", *step.argv], capture_output=True, text=True,
                              timeout=limit)
    except subprocess.TimeoutExpired:
        return None


def run_phase(plan: Plan, phase: str, note: Callable[[str], None] = print,
              run_here: RunHere | None = None) -> list[dict]:
    """Every step of `phase` in order within the plan's budget; the records written."""
    plan.out.mkdir(parents=True, exist_ok=True)
    plan.campaign_config.write_text(campaign_pairs(plan))
    device = device_lines(plan.python)
    (plan.out / "device.txt").write_text(device + "\n")
    name = device.splitlines()[0].removeprefix("device: ") if device else "unknown"
    started, records = time.perf_counter(), []
    for step in STEPS[phase](plan):
        left = plan.budget_s - (time.perf_counter() - started)
        if left < 20:
            note(f"== {step.name} skipped: budget spent")
            continue
        note(f"== {step.name} (limit {min(step.limit_s, left):.0f} s): {' '.join(step.argv)}")
        begun = time.perf_counter()
        done = run_step(step, plan, min(step.limit_s, left), run_here)
        records.append(step_record(step, done, time.perf_counter() - begun, name))
        with open(plan.out / "results.jsonl", "a") as handle:
            handle.write(json.dumps(records[-1]) + "\n")
        note(f"   exit {records[-1]['exit']} after {records[-1]['seconds']} s")
    return records
