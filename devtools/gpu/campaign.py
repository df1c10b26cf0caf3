"""`python -m devtools campaign PHASE --out DIR`: the whole GPU measurement as ordered steps.

Each step is one `python -m specchat ...` (or `python -m devtools ...`, `python -m pytest
...`) command with its own
time limit, run in priority order inside its phase's budget (`PHASE_BUDGET_S`: a lent GPU
gives a session 15 minutes of device time in all, its start and the transfers included).
The prompt-set steps are told their own budget (`bench --budget-s`), so a slow one reports
the prompts it answered instead of being killed with nothing, and they read the prompt set
interleaved by category (DIR/prompts.jsonl), so a budget cut leaves every category measured.
Each step's JSON report (or the tail of its output) is appended to DIR/results.jsonl with
its name, command, exit status and seconds; DIR/device.txt says what ran where (GPU,
versions, llama.cpp's offload), a block per phase. The phases, in their device calls:

- `scale`: `devtools scale` at the real 1B/8B shapes in bf16, then 8-bit and 4-bit
  (DIR/scale.jsonl);
- `check`: `pytest -m gpu`;
- `pair`: the pair's comparison with transformers (bf16), the time outside model forwards,
  the k sweep with the cost model, `distill --head` on the GPU (a small run, timed) and
  that head's cost c and v(n) there (`pairs --check --measure`), the n-gram pair, the same comparison with an 8-bit and a
  4-bit target and a target spread by accelerate under a small `max_memory`, and
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
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # subprocess is imported where it runs: the command line imports this module
    import subprocess

PHASES = ("scale", "check", "pair", "llama")
PHASE_BUDGET_S = {"scale": 110, "check": 70, "pair": 195, "llama": 90}
"""Seconds each phase may take (the lease's arithmetic is `LEASE_CALLS` and `lease_s`)."""
DEVICE_MINUTES = 15
"""A lent GPU's device time per session, everything included (the device tool's limit)."""
LEASE_TARGET_S = 11 * 60
"""What the planned calls may use, the machine's start included, so that the largest call
can be run once more inside `DEVICE_MINUTES`."""
MACHINE_START_S = 120
"""A cold machine's start (the device tool says a minute or more; 2 minutes is planned)."""
CALL_GAP_S = 15
"""Between one call's return and the next call's start (the machine stays warm 30 s)."""


@dataclass(frozen=True)
class DeviceCall:
    """One call of the device tool: what it carries and which phases it runs."""

    script: str
    """`bash scripts/gpu_measure.sh SCRIPT` there."""
    carry: str
    phases: tuple[str, ...]
    setup_s: int
    """Transfer of the carried folder (under 64 MiB), installs, parking, the device probe."""

    @property
    def timeout_s(self) -> int:
        """The call's `timeout_s`: its phases' budgets, its setup and a closing margin."""
        return self.setup_s + sum(PHASE_BUDGET_S[p] for p in self.phases) + 15


LEASE_CALLS = (DeviceCall("scale", ".gpu-a", ("scale",), 25),
               DeviceCall("stage", ".gpu-b", ("check",), 15),
               DeviceCall("pair", ".gpu-c", ("pair",), 25))
"""The measurement's calls, back to back on one warm machine, headline figures first within
each: the built-in GGUF (98 MB) travels in three parts beside the 22 MB working tree. The
llama phase is not among them: llama.cpp's CUDA build takes minutes of all 16 cores, and
nothing may be timed while it compiles (a lease of its own: build, then `llama`)."""


def lease_s(calls: tuple[DeviceCall, ...] = LEASE_CALLS) -> int:
    """Planned device time of `calls`: the start, every call to its limit, the gaps and the
    give-back after the last."""
    return MACHINE_START_S + sum(c.timeout_s for c in calls) + CALL_GAP_S * len(calls)


def lease_lines(calls: tuple[DeviceCall, ...] = LEASE_CALLS) -> str:
    """The device calls to make, back to back, and the lease they plan for."""
    lines = [f'run(carry=["{c.carry}"], command="bash scripts/gpu_measure.sh {c.script}", '
             f"timeout_s={c.timeout_s})" for c in calls]
    return ("next, back to back (give_back after the last):\n  " + "\n  ".join(lines)
            + f"\nplanned: {lease_s(calls)} s of the {DEVICE_MINUTES * 60} s a lent GPU gives"
            + "\nthen, here: scripts/gpu_measure.sh unslim, and publish the calls' folders")


REPORT_S = 15
"""Seconds a prompt-set step keeps, after its `--budget-s`, to finish its last prompt and
write its report."""


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
    quant_limit: int = 5
    shapes: str = "1b,8b"
    quantizations: str = "none,8bit,4bit"
    budget_s: int | None = None
    """Seconds for the phase; None: its `PHASE_BUDGET_S`."""
    llama_bin: Path | None = None
    """llama.cpp's own programs of the GPU build (llama-bench, llama-speculative-simple): the
    llama steps race them; None leaves `bench` to find them where it builds them."""
    dry_run: bool = False
    python: str = field(default=sys.executable)
    started: str = field(default_factory=lambda: time.strftime("%H%M%S"))
    """When the plan was made: a rerun of a phase trains its head afresh."""

    @property
    def campaign_config(self) -> Path:
        return self.out / "campaign.toml"

    @property
    def head_dir(self) -> Path:
        """Where `head-distill` trains the GGUF target's head (its shards are tens of MB, so
        it stays on the device, beside DIR)."""
        return self.out.parent / f"{self.out.name}-head-{self.started}"


def dry_plan(plan: Plan) -> Plan:
    """The same steps on a CPU in seconds: tiny shapes, few tokens, float32."""
    return replace(plan, max_new_tokens=8, dtype="float32", sweep_ks="1,2", quant_limit=2,
                   dry_run=True)


def bench_options(plan: Plan, pair: str) -> tuple[str, ...]:
    prompts = ("--prompts", str(plan.prompts)) if plan.prompts else ()
    return ("--pair", pair, "--config", str(plan.campaign_config), "--dtype", plan.dtype,
            "--max-new-tokens", str(plan.max_new_tokens), "--json", *prompts)


def bench(plan: Plan, name: str, subcommand: str, pair: str, *more: str, limit_s: int,
          prompts: int | None = None, settle_s: int | None = REPORT_S) -> Step:
    """A prompt-set `bench` step that starts no prompt after `limit_s - settle_s` seconds
    (`--budget-s`; None: no budget, for `overhead`, which times a fixed few prompts); a dry
    run answers two prompts whatever `prompts` says."""
    prompts = 2 if plan.dry_run else prompts
    limits = ("--limit", str(prompts)) if prompts else ()
    budget = ("--budget-s", str(max(5, limit_s - settle_s))) if settle_s is not None else ()
    argv = ("specchat", "bench", subcommand, *bench_options(plan, pair), *limits, *budget, *more)
    return Step(name, argv, limit_s)


def phase_budget(plan: Plan, phase: str) -> int:
    """The plan's seconds for `phase`: its own, else the phase's `PHASE_BUDGET_S`."""
    return plan.budget_s or PHASE_BUDGET_S[phase]


def scale_steps(plan: Plan) -> list[Step]:
    budget = phase_budget(plan, "scale")
    scale: tuple[str, ...] = ("devtools", "scale", "--out", str(plan.out / "scale.jsonl"),
             "--shapes", plan.shapes, "--quant", plan.quantizations,
             "--budget-s", str(max(20, budget - 20)))
    if plan.dry_run:
        scale += ("--tiny", "--device", "cpu", "--tokens", "24", "--repeats", "3")
    return [Step("scale", scale, max(30, budget - 5))]


GPU_TEST_FILES = ("tests/test_gpu.py", "tests/test_head.py")
"""The test files with `gpu`-marked tests (the engine's CUDA path; the draft head trained and
drafting on CUDA)."""


def check_steps(plan: Plan) -> list[Step]:
    pytest = ("pytest", "-q", "-m", "gpu", *GPU_TEST_FILES, "-p", "no:cacheprovider")
    return [Step("pytest-gpu", pytest + (("--collect-only",) if plan.dry_run else ()),
                 phase_budget(plan, "check"))]


def pair_steps(plan: Plan) -> list[Step]:
    """In priority order: what a phase cut short leaves out is the least needed (the
    quantized and spread targets are also in `check` and, at scale, in `scale`)."""
    pair, few = plan.pair, plan.quant_limit
    return [bench(plan, f"standard-{pair}", "run", pair, limit_s=65),
            bench(plan, f"overhead-{pair}", "overhead", pair, prompts=3, limit_s=30,
                  settle_s=None),
            bench(plan, f"sweep-profile-{pair}", "profile", pair, "--ks", plan.sweep_ks,
                  limit_s=55, settle_s=25),
            head_step(plan),
            Step(f"check-{plan.gguf_pair}-head", ("specchat", "pairs", "--config",
                                                  str(plan.campaign_config), "--check",
                                                  f"{plan.gguf_pair}-head", "--measure"), 20),
            bench(plan, f"standard-{plan.ngram_pair}", "run", plan.ngram_pair, prompts=few,
                  limit_s=20, settle_s=10),
            bench(plan, "standard-8bit", "run", f"{pair}-8bit", prompts=few, limit_s=20,
                  settle_s=10),
            bench(plan, "standard-4bit", "run", f"{pair}-4bit", prompts=few, limit_s=20,
                  settle_s=10),
            bench(plan, "standard-spread", "run", f"{pair}-spread", prompts=few, limit_s=20,
                  settle_s=10),
            Step(f"check-{pair}", ("specchat", "pairs", "--config", str(plan.campaign_config),
                                   "--check", pair, "--measure"), 20)]


def head_step(plan: Plan) -> Step:
    """`distill --head` on the GPU (issue 37: minutes there): the GGUF pair's target answers
    and the head trains on the GPU, a small run (8,000 answer tokens, 100 steps) whose
    summary line gives the features' and the training's times, beside the same command on a
    CPU (docs/distill.md). The next step measures the head's cost c on the GPU
    (`pairs --check --measure` of the pair GGUF-head, written to campaign.toml)."""
    from specchat.models.config.pairs import load_catalog

    target = load_catalog(plan.config).get(plan.gguf_pair).target
    out = plan.head_dir
    size = (("--tokens", "40", "--steps", "3", "--max-new-tokens", "8", "--vocab", "48",
             "--width", "32", "--device", "cpu") if plan.dry_run else
            ("--tokens", "8000", "--steps", "100", "--device", "cuda"))
    argv = ("specchat", "distill", "--head", "--target", target, "--out", str(out),
            "--checkpoint-every", "50", *size)
    return Step("head-distill", argv, 45)


def llama_steps(plan: Plan) -> list[Step]:
    gguf = plan.gguf_pair
    programs = ("--llama-bin", str(plan.llama_bin)) if plan.llama_bin else ()
    return [bench(plan, "llama-profile", "profile", f"{gguf}-llama-spec", "--ks", plan.sweep_ks,
                  *programs, limit_s=50, settle_s=25),
            bench(plan, "llama-standard", "run", f"{gguf}-llama", *programs, limit_s=30),
            bench(plan, "llama-spec", "run", f"{gguf}-llama-spec", *programs, limit_s=30)]


STEPS = {"scale": scale_steps, "check": check_steps, "pair": pair_steps, "llama": llama_steps}


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
    text += (f'\n[pairs.{gguf.name}-head]\ntarget = "{gguf.target}"\n'
             f'draft = "{plan.head_dir / "head.safetensors"}"\nk = 4\nbackend = "torch"\n')
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
    import subprocess

    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120)
    return (done.stdout + done.stderr[-500:]).strip()


TIMED_OUT = 124
"""A step's exit status when it ran past its limit (as `timeout` says it)."""


def step_record(step: Step, done: subprocess.CompletedProcess | None, seconds: float,
                device: str) -> dict:
    """The results.jsonl object of one step: its JSON report, or the tail of its output (a
    step that ran out of time: what it wrote until then, e.g. a progress line's rate)."""
    if done is None:
        return {"step": step.name, "device": device, "exit": TIMED_OUT,
                "seconds": round(seconds, 1), "command": " ".join(step.argv),
                "report": {"output": "timed out"}}
    text = done.stdout.strip() or ("timed out" if done.returncode == TIMED_OUT else "")
    try:
        report = json.loads(text) if text.startswith("{") else {"output": text[-20000:]}
    except ValueError:
        report = {"output": text[-20000:]}
    if done.returncode and "output" in report:
        report["stderr"] = done.stderr[-4000:]
    return {"step": step.name, "device": device, "exit": done.returncode,
            "seconds": round(seconds, 1), "command": " ".join(step.argv), "report": report}


IN_PROCESS = ("specchat", "devtools")
"""The steps' modules a dry run may answer in this process (their command lines are click's)."""
RunHere = Callable[[tuple[str, ...]], "subprocess.CompletedProcess"]
"""Runs `python -m MODULE ARGS` (a step's argv, MODULE one of IN_PROCESS) in this process
(given by the command line, which owns the click groups)."""


def run_step(step: Step, plan: Plan, limit: float,
             run_here: RunHere | None = None) -> subprocess.CompletedProcess:
    """The step's finished process (exit `TIMED_OUT`: killed at `limit`, with what it wrote
    until then). A dry run given `run_here` answers specchat's and devtools' own steps in
    this process: its imports are paid once, not per step."""
    if plan.dry_run and run_here is not None and step.argv[0] in IN_PROCESS:
        return run_here(step.argv)
    import subprocess

    try:
        return subprocess.run([plan.python, "-m", *step.argv], capture_output=True, text=True,
                              timeout=limit)
    except subprocess.TimeoutExpired as expired:  # killed: keep what it wrote until then
        return subprocess.CompletedProcess(expired.cmd, TIMED_OUT, as_text(expired.stdout),
                                           as_text(expired.stderr)
                                           + f"\n(killed after its {limit:.0f} s)")


def as_text(output: bytes | str | None) -> str:
    """A timed-out process's captured output (always bytes, whatever `text` said)."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def interleaved_by_category(lines: list[str]) -> list[str]:
    """A prompt set's JSON lines reordered round-robin over their categories (each category's
    own order kept), so that the first N prompts cover every category evenly."""
    groups: dict[str, list[str]] = {}
    for line in lines:
        groups.setdefault(str(json.loads(line).get("category", "")), []).append(line)
    order = [group[i] for i in range(max(map(len, groups.values()), default=0))
             for group in groups.values() if i < len(group)]
    return order


def with_interleaved_prompts(plan: Plan) -> Plan:
    """The plan reading DIR/prompts.jsonl: its prompt set (or the packaged one) interleaved
    by category."""
    from specchat.bench.prompts import resolve_prompts_file

    source = resolve_prompts_file(plan.prompts)
    lines = [line for line in source.read_text().splitlines() if line.strip()]
    target = plan.out / "prompts.jsonl"
    if source.resolve() != target.resolve():
        target.write_text("".join(line + "\n" for line in interleaved_by_category(lines)))
    return replace(plan, prompts=target)


def run_phase(plan: Plan, phase: str, note: Callable[[str], None] = print,
              run_here: RunHere | None = None) -> list[dict]:
    """Every step of `phase` in order within its budget; the records written."""
    plan.out.mkdir(parents=True, exist_ok=True)
    budget = phase_budget(plan, phase)
    plan = with_interleaved_prompts(replace(plan, budget_s=budget))
    plan.campaign_config.write_text(campaign_pairs(plan))
    device = device_lines(plan.python)
    with open(plan.out / "device.txt", "a") as handle:
        handle.write(f"[{phase}]\n{device}\n")
    name = device.splitlines()[0].removeprefix("device: ") if device else "unknown"
    started, records = time.perf_counter(), []
    for step in STEPS[phase](plan):
        left = budget - (time.perf_counter() - started)
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
