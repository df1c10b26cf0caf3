"""llama.cpp's own programs as bench arms (bench/llama_programs.py), their build
(devtools/llama_build.py), and MT-bench / Spec-Bench questions as prompts: the command lines the
arms run, the parsing of the programs' output (fake programs that print what the real ones
print), the runner handing llama-bench the reference answer's length and later turns their
conversation, and the build's CMake steps with a fake cmake. No real llama.cpp program runs."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from specchat.bench.arms import ArmRun
from specchat.bench.llama_programs import (BENCH, SPECULATIVE, BenchProgramArm, Programs, Setup,
                                           SpeculativeProgramArm, draft_args, ngram_args,
                                           parse_bench, parse_speculative, program_arms,
                                           sweep_program_arms)
from specchat.bench.prompts import BenchPrompt, load_prompts
from specchat.bench.runner import run_prompts
from specchat.errors import UsageError

SPECULATIVE_STDERR = """\
llama_model_loader: loaded meta data with 26 key-value pairs
encoded   41 tokens in    0.812 seconds, speed:   50.493 t/s
decoded   97 tokens in    6.250 seconds, speed:   15.520 t/s

n_draft   = 3
n_predict = 97
n_drafted = 84
n_accept  = 69
accept    = 82.143%
"""

REAL_STDERR = """\
0.01.718.708 I cmn          init: llama threadpool init, n_threads = 2
0.02.031.867 I common_speculative_init_result: loading draft model 'draft.gguf'
0.17.376.224 I encoded   17 tokens in    2.100 seconds, speed:    8.095 t/s
0.17.376.236 I decoded   18 tokens in   12.454 seconds, speed:    1.445 t/s
0.17.376.237 I
0.17.376.237 I n_draft   = 3
0.17.376.237 I n_predict = 18
0.17.376.237 I n_drafted = 18
0.17.376.238 I n_accept  = 12
0.17.376.238 I accept    = 66.667%
"""
"""The end of what llama-cpp-python 0.3.36's own llama-speculative-simple printed here (the
Qwen2.5-Coder pair, k = 3): every line after llama.cpp's log prefix."""


class CharTokenizer:
    """One id per character; no chat template (the fallback "User: ...\\nAssistant:")."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)


def fake_program(folder: Path, name: str, stdout: str, stderr: str, status: int = 0) -> Path:
    """An executable that records its arguments (one JSON list per call) and prints the given
    output, as the real program would."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"""#!{sys.executable}
import json, sys
with open({str(folder / (name + '.calls'))!r}, "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
sys.stdout.write({stdout!r})
sys.stderr.write({stderr!r})
sys.exit({status})
""")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def calls(folder: Path, name: str) -> list[list[str]]:
    return [json.loads(line) for line in (folder / f"{name}.calls").read_text().splitlines()]


def bench_json(prompt: int, generated: int, seconds: float) -> str:
    return json.dumps([{"n_prompt": prompt, "n_gen": generated, "n_depth": 0,
                        "avg_ns": int(seconds * 1e9), "avg_ts": (prompt + generated) / seconds}])


SETUP = Setup(Path("/models/target.gguf"), threads=2, context=4096, seed=7)


def test_the_draft_arm_runs_llama_speculative_simple_as_the_pair_would():
    arm = SpeculativeProgramArm("lcpp_draft", "x", Programs(Path("/bin")), SETUP, CharTokenizer(),
                                draft_args(Path("/models/draft.gguf"), 3, 2))
    command = arm.command("<prompt>", 96)
    assert command[0] == "/bin/llama-speculative-simple"
    joined = " ".join(command)
    for part in ("-m /models/target.gguf", "-t 2", "-ngl 0", "-c 4096", "-n 96", "--temp 0",
                 "--seed 7", "--spec-type draft-simple", "-md /models/draft.gguf",
                 "--spec-draft-n-max 3", "--spec-draft-n-min 0", "--spec-draft-p-min 0", "-td 2"):
        assert part in joined, part
    assert command[-2:] == ["-p", "<prompt>"]


def test_the_ngram_arms_name_llama_cpps_own_options():
    assert ngram_args("ngram-simple", 3, 12) == ["--spec-type", "ngram-simple",
                                                 "--spec-ngram-simple-size-n", "3",
                                                 "--spec-ngram-simple-size-m", "12"]
    assert ngram_args("ngram-map-k", 2, 8)[-4:] == ["--spec-ngram-map-k-size-n", "2",
                                                    "--spec-ngram-map-k-size-m", "8"]


def test_llama_bench_times_the_answers_work_from_the_prompts_depth(fake_cpu):
    fake_cpu({"avx2"})  # a CPU where llama.cpp repacks (no AMX: test_llamacpp_repack.py)
    arm = BenchProgramArm(Programs(Path("/bin")), SETUP)
    assert arm.command(41, 95) == ["/bin/llama-bench", "-m", "/models/target.gguf", "-t", "2",
                                   "-ngl", "0", "-p", "0", "-n", "0", "-pg", "41,95", "-r", "1",
                                   "-o", "json"]
    assert arm.follows_reference
    on_gpu = BenchProgramArm(Programs(Path("/bin")), Setup(SETUP.target, 2, 4096, gpu_layers=-1))
    layers = on_gpu.command(41, 95)[on_gpu.command(41, 95).index("-ngl") + 1]
    assert layers.isdigit() and int(layers) >= 999  # llama-bench parses -ngl as numbers only


def test_the_speculative_programs_output_is_parsed():
    stats = parse_speculative(SPECULATIVE_STDERR)
    assert (stats.prompt_tokens, stats.tokens, stats.drafted, stats.accepted) == (41, 97, 84, 69)
    assert stats.seconds == pytest.approx(0.812 + 6.250)
    real = parse_speculative(REAL_STDERR)
    assert (real.prompt_tokens, real.tokens, real.drafted, real.accepted) == (17, 18, 18, 12)
    assert real.seconds == pytest.approx(2.100 + 12.454)


def test_output_without_timings_or_results_is_a_one_line_error():
    with pytest.raises(UsageError, match="printed no timings"):
        parse_speculative("error: unknown argument: --spec-type\n")
    with pytest.raises(UsageError, match="printed no result for -pg 41,95"):
        parse_bench(bench_json(41, 10, 1.0), 41, 95)
    assert parse_bench(bench_json(41, 95, 2.5), 41, 95) == pytest.approx(2.5)


def test_the_arms_run_the_programs_on_the_prompts_own_text(tmp_path):
    programs = Programs(tmp_path / "bin")
    fake_program(programs.folder, SPECULATIVE, "generated text", SPECULATIVE_STDERR)
    fake_program(programs.folder, BENCH, bench_json(5, 11, 0.5), "")
    arm = SpeculativeProgramArm("lcpp_draft", "x", programs, SETUP, CharTokenizer(),
                                draft_args(Path("d.gguf"), 3, 2))
    run = arm.run([ord(c) for c in "hello"], 12)
    assert calls(programs.folder, SPECULATIVE)[0][-2:] == ["-p", "hello"]
    assert (run.token_count, run.drafted, run.accepted, run.tokens) == (97, 84, 69, [])
    assert run.seconds == pytest.approx(7.062) and not run.ids_known
    timed = BenchProgramArm(programs, SETUP).run([1, 2, 3, 4, 5], 12)
    assert "5,11" in calls(programs.folder, BENCH)[0] and timed.token_count == 12
    assert timed.tokens_per_s == pytest.approx(12 / 0.5)


def test_a_failing_program_is_a_one_line_error_with_its_last_words(tmp_path):
    programs = Programs(tmp_path / "bin")
    fake_program(programs.folder, SPECULATIVE, "", "loading\nerror: failed to load model\n", 1)
    arm = SpeculativeProgramArm("lcpp_draft", "x", programs, SETUP, CharTokenizer(), [])
    with pytest.raises(UsageError, match=r"llama-speculative-simple failed \(exit 1\): error: "
                                         r"failed to load model$"):
        arm.run([104, 105], 4)


def fake_pair(draft):
    return SimpleNamespace(draft=draft, draft_model=None if hasattr(draft, "max_ngram") else draft,
                           tokenizer=CharTokenizer())


def test_a_draft_pair_gets_draft_simple_and_an_ngram_pair_llama_cpps_ngram_lookups():
    programs = Programs(Path("/bin"))
    with_draft = program_arms(fake_pair(SimpleNamespace(path=Path("d.gguf"))), programs, SETUP, 3)
    assert [a.key for a in with_draft] == ["lcpp_draft", "llama_bench"]
    ngram = program_arms(fake_pair(SimpleNamespace(max_ngram=3)), programs, SETUP, 12)
    assert [a.key for a in ngram] == ["lcpp_ngram-simple", "lcpp_ngram-map-k", "llama_bench"]
    torch_draft = program_arms(fake_pair(SimpleNamespace(model=object())), programs, SETUP, 3)
    assert [a.key for a in torch_draft] == ["llama_bench"]
    swept = sweep_program_arms(fake_pair(SimpleNamespace(path=Path("d.gguf"))), programs, SETUP,
                               [2, 3])
    assert [a.key for a in swept] == ["lcpp_draft_k2", "lcpp_draft_k3", "llama_bench"]
    assert "--spec-draft-n-max 2" in " ".join(swept[0].command("p", 8))


class Recorded:
    """An arm that answers with fixed ids and remembers what it was asked."""

    def __init__(self, key: str, answer: str, follows_reference: bool = False):
        self.key, self.label, self.speculative = key, key, False
        self.answer, self.follows_reference = answer, follows_reference
        self.asked: list[tuple[str, int]] = []

    def run(self, prompt, max_new_tokens):
        self.asked.append(("".join(chr(i) for i in prompt), max_new_tokens))
        return ArmRun([ord(c) for c in self.answer][:max_new_tokens], 1.0)


def test_llama_bench_is_handed_the_reference_answers_length_after_the_others():
    target, timed = Recorded("target", "four"), Recorded("llama_bench", "", follows_reference=True)
    run_prompts([timed, target], CharTokenizer(), [BenchPrompt("p", "chat", "hi")], 96)
    assert timed.asked[-1][1] == len("four")  # not the budget of 96
    assert target.asked[-1][1] == 96


def test_a_later_turn_is_asked_after_the_first_turn_and_the_reference_answer(tmp_path):
    questions = tmp_path / "question.jsonl"
    questions.write_text(json.dumps({"question_id": 81, "category": "writing",
                                     "turns": ["Write a poem.", "Now shorter."]}) + "\n")
    prompts = load_prompts(questions, all_turns=True)
    assert [(p.id, p.follows) for p in prompts] == [("81", None), ("81.2", "81")]
    target = Recorded("target", "Roses.")
    run_prompts([target], CharTokenizer(), prompts, 96)
    second = target.asked[-1][0]
    assert second == "User: Write a poem.\nAssistant: Roses.\nUser: Now shorter.\nAssistant:"


def test_mt_bench_questions_give_their_first_turn_unless_every_turn_is_asked(tmp_path):
    questions = tmp_path / "question.jsonl"
    questions.write_text(
        json.dumps({"question_id": 1, "category": "coding", "turns": ["a", "b"]}) + "\n"
        + json.dumps({"id": "own", "category": "chat", "prompt": "c"}) + "\n")
    assert [(p.id, p.category, p.prompt) for p in load_prompts(questions)] == \
        [("1", "coding", "a"), ("own", "chat", "c")]
    assert len(load_prompts(questions, all_turns=True)) == 3
    questions.write_text(json.dumps({"question_id": 2, "turns": []}) + "\n")
    with pytest.raises(UsageError, match="'turns' must be a list of non-empty strings"):
        load_prompts(questions)


def test_a_missing_llama_bin_folder_is_an_error_and_an_unbuilt_default_a_note(tmp_path, capsys,
                                                                              monkeypatch):
    from specchat.commands.bench import Setup as CommandSetup

    monkeypatch.setenv("SPECCHAT_CACHE_DIR", str(tmp_path / "cache"))
    setup = CommandSetup(None, [], tmp_path)
    assert setup.programs() is None  # nothing built in the test's cache
    assert "`make llama-tools`" in capsys.readouterr().err
    setup.llama_bin = tmp_path / "nowhere"
    with pytest.raises(UsageError, match="lacks llama-speculative-simple, llama-bench: build them"):
        setup.programs()


def test_build_llama_configures_once_builds_the_two_programs_and_installs_them(tmp_path,
                                                                               monkeypatch):
    from devtools import llama_build
    from specchat.bench.llama_programs import default_folder

    monkeypatch.setenv("SPECCHAT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(llama_build, "bindings_version", lambda: "9.9.9")
    vendored = llama_build.root() / "src-9.9.9" / "vendor" / "llama.cpp"
    vendored.mkdir(parents=True)
    (vendored / "CMakeLists.txt").write_text("")
    tools = tmp_path / "tools"
    fake_program(tools, "cmake", "", "")
    (tools / "cmake").write_text((tools / "cmake").read_text().replace(
        "sys.exit(0)", "import pathlib\nif '--build' in sys.argv:\n"
        "    b = pathlib.Path(sys.argv[sys.argv.index('--build') + 1]) / 'bin'\n"
        "    b.mkdir(parents=True, exist_ok=True)\n"
        "    [(b / n).write_text('built') for n in ('llama-bench', 'llama-speculative-simple')]\n"
        "else:\n    pathlib.Path(sys.argv[sys.argv.index('-B') + 1], 'CMakeCache.txt').parent.mkdir(parents=True, exist_ok=True)\n"
        "    pathlib.Path(sys.argv[sys.argv.index('-B') + 1], 'CMakeCache.txt').write_text('')\n"
        "sys.exit(0)"))
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CMAKE_ARGS", "-DGGML_CUDA=on")
    out = llama_build.build(jobs=3)
    assert out == default_folder("9.9.9") == llama_build.root() / "bin-9.9.9"
    assert {p.name for p in out.iterdir()} == {"llama-bench", "llama-speculative-simple"}
    configure, compile_ = calls(tools, "cmake")
    assert configure[:2] == ["-S", str(vendored)] and "-DCMAKE_BUILD_TYPE=Release" in configure
    assert configure[-1] == "-DGGML_CUDA=on"
    assert compile_[compile_.index("-j") + 1] == "3"
    assert compile_[compile_.index("--target") + 1:] == ["llama-bench", "llama-speculative-simple"]
    llama_build.build(jobs=3)
    assert len(calls(tools, "cmake")) == 3  # configured once; the second build only compiles


def test_the_sweep_sets_each_fixed_k_against_llama_cpps_speculation_at_that_k():
    from specchat.bench.sweep import format_sweep, sweep_entry

    rates = {"target": 10.0, "k2": 12.0, "k3": 13.0, "auto": 10.5, "lcpp_draft_k2": 8.0,
             "lcpp_draft_k3": 10.0, "llama_bench": 10.0}
    group = {"arms": {key: {"tokens_per_s": rate} for key, rate in rates.items()}}
    entry = sweep_entry(group, ["k2", "k3"])
    assert entry["vs_llama"] == {"k2/draft": 1.5, "k3/draft": 1.3}
    assert entry["target_vs_llama_bench"] == 1.0 and entry["auto_vs_target"] == 1.05
    text = format_sweep({"arms": {k: k for k in rates}, "categories": {}, "total": group,
                         "sweep": {"TOTAL": entry}})
    assert "against llama.cpp's own programs" in text and "k3/draft" in text and "1.30x" in text
    columns = text.splitlines()[1].split()  # named as the report's "arms:" line names them
    assert columns[:2] == ["category", "tgt"] and "lbench" in columns and "llama_bench" not in columns
