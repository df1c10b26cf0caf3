"""llama.cpp's own programs as arms of `bench`, run as processes on the pair's own files.

- `llama-speculative-simple` with `--spec-type draft-simple` (the pair's GGUF draft) and with
  llama.cpp's n-gram lookups (`ngram-simple`, `ngram-map-k`: n-gram of the pair's `ngram_n`,
  drafts of up to k tokens), greedy, at the pair's draft length k and threads, on the same
  chat-templated prompt (its text, which the program tokenizes back to the same ids). Its
  time is what it reports for the prompt and the answer (`encoded … in S seconds`, `decoded
  … in S seconds`): loading the models is no part of it, as for specchat's arms.
- `llama-bench`: llama.cpp's plain decoding of the answer's length from the prompt's depth
  (`-pg P,N-1`: the prompt's P tokens in one batch, then N-1 one-token steps, the work of an
  answer of N tokens), for as many tokens as specchat target-only answered.

They are built from the llama.cpp that llama-cpp-python vendors (by the repository's developer
tools: `make llama-tools`) into `default_folder`, where `bench` looks for them; elsewhere is
configuration (`bench --llama-bin DIR`).
Each arm builds its command line (`command`) and parses the program's output
(`parse_speculative`, `parse_bench`). Knows nothing about reports.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from specchat import paths
from specchat.bench.arms import ArmRun
from specchat.errors import UsageError
from specchat.models.llamacpp.repack import repack_allowed

if TYPE_CHECKING:
    from specchat.chat.pair import Pair

SPECULATIVE = "llama-speculative-simple"
BENCH = "llama-bench"
BENCH_EVERY_LAYER = "999"
"""llama-bench's -ngl for every layer: it reads numbers and ranges only ("all", which
llama-speculative-simple takes, is "invalid range format" there); more than any model has."""
PROGRAMS = (SPECULATIVE, BENCH)
NGRAM_TYPES = ("ngram-simple", "ngram-map-k")
"""llama.cpp's n-gram lookups run beside an n-gram pair (each drafts up to k tokens after a
match of the pair's ngram_n tokens)."""
TIMEOUT_S = 900
TIMED = re.compile(r"(encoded|decoded)\s+(\d+) tokens in\s+([\d.]+) seconds")
COUNTED = re.compile(r"(?:^|\s)(n_drafted|n_accept)\s*=\s*(\d+)", re.MULTILINE)
"""Counts as the program logs them, bare or after llama.cpp's log prefix ("0.17.376.237 I ")."""


def programs_root() -> Path:
    """The user cache's llama.cpp folder: sources, builds and the built programs."""
    return paths.cache_dir() / "llama.cpp"


def default_folder(version: str | None = None) -> Path:
    """Where the programs built from llama-cpp-python `version` (default: the installed one)
    live, and where `bench` looks for them unless given --llama-bin."""
    if version is None:
        import importlib.metadata

        try:
            version = importlib.metadata.version("llama-cpp-python")
        except importlib.metadata.PackageNotFoundError:
            return programs_root() / "bin"
    return programs_root() / f"bin-{version}"


@dataclass(frozen=True)
class Programs:
    """The folder holding llama.cpp's programs."""

    folder: Path

    def path(self, name: str) -> Path:
        return self.folder / name

    def missing(self) -> list[str]:
        return [name for name in PROGRAMS if not self.path(name).is_file()]


@dataclass(frozen=True)
class Setup:
    """What every program arm shares with the pair's specchat arms."""

    target: Path
    threads: int
    context: int
    seed: int = 0
    gpu_layers: int = 0
    """llama.cpp's -ngl: -1 every layer (the pair's gpu_layers = "all" on a GPU build)."""
    main_gpu: int | None = None
    """The one GPU of a pair's device = "cuda:N" (-sm none -mg N), as the backend loads it."""

    def common(self, every_layer: str = "all") -> list[str]:
        """-m, -t, -ngl (every layer written as the program reads it), and the one GPU."""
        layers = every_layer if self.gpu_layers < 0 else str(self.gpu_layers)
        one_gpu = [] if self.main_gpu is None or not self.gpu_layers else [
            "-sm", "none", "-mg", str(self.main_gpu)]
        return ["-m", str(self.target), "-t", str(self.threads), "-ngl", layers, *one_gpu]


@dataclass(frozen=True)
class SpeculativeStats:
    """What `llama-speculative-simple` reports of one answer."""

    prompt_tokens: int
    tokens: int
    seconds: float
    """Its prompt's and its answer's time together, as it measured them."""
    drafted: int
    accepted: int


def parse_speculative(stderr: str) -> SpeculativeStats:
    """The times and counts `llama-speculative-simple` prints at its end."""
    timed = {kind: (int(n), float(s)) for kind, n, s in TIMED.findall(stderr)}
    counted = dict(COUNTED.findall(stderr))
    if "encoded" not in timed or "decoded" not in timed:
        raise UsageError(f"{SPECULATIVE} printed no timings (its last line: "
                         f"{last_line(stderr)!r}): is it the program of this llama.cpp?")
    return SpeculativeStats(timed["encoded"][0], timed["decoded"][0],
                            timed["encoded"][1] + timed["decoded"][1],
                            int(counted.get("n_drafted", 0)), int(counted.get("n_accept", 0)))


def parse_bench(stdout: str, prompt: int, generated: int) -> float:
    """Seconds of llama-bench's `pp+tg` test of `prompt` then `generated` tokens (its JSON)."""
    try:
        tests = json.loads(stdout)
        test = next(t for t in tests if t["n_prompt"] == prompt and t["n_gen"] == generated)
        return float(test["avg_ns"]) / 1e9
    except (ValueError, KeyError, TypeError, StopIteration):
        raise UsageError(f"{BENCH} printed no result for -pg {prompt},{generated} (its output "
                         f"begins {stdout[:80]!r})") from None


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def run_program(command: list[str]) -> subprocess.CompletedProcess:
    """Run one of llama.cpp's programs; a one-line error when it fails."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S,
                              errors="replace")
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UsageError(f"{Path(command[0]).name} could not run ({error})") from None
    if done.returncode != 0:
        raise UsageError(f"{Path(command[0]).name} failed (exit {done.returncode}): "
                         f"{last_line(done.stderr) or last_line(done.stdout)}")
    return done


class SpeculativeProgramArm:
    """`llama-speculative-simple`: a draft model or an n-gram lookup, greedy."""

    speculative = True

    def __init__(self, key: str, label: str, programs: Programs, setup: Setup, tokenizer: Any,
                 spec_args: list[str]):
        self.key, self.label = key, label
        self.programs, self.setup, self.tokenizer = programs, setup, tokenizer
        self.spec_args = spec_args

    def command(self, prompt_text: str, max_new_tokens: int) -> list[str]:
        return [str(self.programs.path(SPECULATIVE)), *self.setup.common(), *repack_args(SPECULATIVE),
                "-c", str(self.setup.context), "-n", str(max_new_tokens), "--temp", "0",
                "--seed", str(self.setup.seed), *self.spec_args, "-p", prompt_text]

    def run(self, prompt: list[int], max_new_tokens: int) -> ArmRun:
        text = self.tokenizer.decode(prompt, skip_special_tokens=False)
        stats = parse_speculative(run_program(self.command(text, max_new_tokens)).stderr)
        return ArmRun([], stats.seconds, drafted=stats.drafted, accepted=stats.accepted,
                      count=stats.tokens)


class BenchProgramArm:
    """`llama-bench`: plain decoding of the reference answer's length after the prompt."""

    key, label, speculative = "llama_bench", "llama-bench pp+tg (the answer's depth)", False
    follows_reference = True
    """Times a given number of tokens: the runner hands it specchat target-only's length."""

    def __init__(self, programs: Programs, setup: Setup):
        self.programs, self.setup = programs, setup

    def command(self, prompt_tokens: int, generated: int) -> list[str]:
        return [str(self.programs.path(BENCH)), *self.setup.common(BENCH_EVERY_LAYER),
                *repack_args(BENCH),
                "-p", "0", "-n", "0", "-pg", f"{prompt_tokens},{generated}", "-r", "1", "-o", "json"]

    def run(self, prompt: list[int], max_new_tokens: int) -> ArmRun:
        generated = max(0, max_new_tokens - 1)  # the prompt's batch gives the first token
        done = run_program(self.command(len(prompt), generated))
        return ArmRun([], parse_bench(done.stdout, len(prompt), generated), count=max_new_tokens)


def repack_args(program: str) -> list[str]:
    """Weight repacking off where specchat's own llama.cpp loads turn it off (its AMX kernels
    crash: models/llamacpp/repack.py), spelled as each program reads it."""
    if repack_allowed():
        return []
    return ["--repack", "0"] if program == BENCH else ["--no-repack"]


def draft_args(draft: Path, k: int, threads: int, gpu_layers: int = 0) -> list[str]:
    """`--spec-type draft-simple` with the pair's draft: exactly k drafts a round (no minimum
    probability), the draft on the target's threads."""
    layers = "all" if gpu_layers < 0 else str(gpu_layers)
    return ["--spec-type", "draft-simple", "-md", str(draft), "--spec-draft-n-max", str(k),
            "--spec-draft-n-min", "0", "--spec-draft-p-min", "0", "-td", str(threads),
            "-ngld", layers]


def ngram_args(kind: str, n: int, k: int) -> list[str]:
    """One of llama.cpp's n-gram lookups: match `n` tokens, draft up to `k`."""
    option = kind.replace("ngram-", "--spec-ngram-")
    return ["--spec-type", kind, f"{option}-size-n", str(n), f"{option}-size-m", str(k)]


def speculation_arms(pair: Pair, programs: Programs, setup: Setup, k: int,
                     suffix: str = "") -> list:
    """`llama-speculative-simple` as the pair drafts: its draft model at k, or (an n-gram pair)
    each of llama.cpp's n-gram lookups; keys `lcpp_draft`, `lcpp_ngram-simple`, ... + suffix."""
    if hasattr(pair.draft, "max_ngram"):
        return [SpeculativeProgramArm(f"lcpp_{kind}{suffix}", f"{SPECULATIVE} {kind}, k={k}",
                                      programs, setup, pair.tokenizer,
                                      ngram_args(kind, pair.draft.max_ngram, k))
                for kind in NGRAM_TYPES]
    if getattr(pair.draft_model, "path", None) is None:
        return []  # no draft, or a torch draft: llama.cpp's programs run GGUF drafts only
    return [SpeculativeProgramArm(f"lcpp_draft{suffix}", f"{SPECULATIVE} draft-simple, k={k}",
                                  programs, setup, pair.tokenizer,
                                  draft_args(pair.draft_model.path, k, setup.threads,
                                             setup.gpu_layers))]


def program_arms(pair: Pair, programs: Programs, setup: Setup, k: int) -> list:
    """`bench run`'s arms of llama.cpp's programs: its speculation at k, then llama-bench."""
    return speculation_arms(pair, programs, setup, k) + [BenchProgramArm(programs, setup)]


def sweep_program_arms(pair: Pair, programs: Programs, setup: Setup,
                       ks: Sequence[int]) -> list:
    """`bench sweep`'s: its speculation at every fixed k (keys ending `_k{k}`), then llama-bench."""
    arms = [arm for k in ks for arm in speculation_arms(pair, programs, setup, k, f"_k{k}")]
    return arms + [BenchProgramArm(programs, setup)]
