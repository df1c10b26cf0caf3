"""`specchat bench` through click's CliRunner on the tiny pairs: the report's shape,
greedy outputs flagged identical, and one-line errors for bad prompt files."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from specchat.cli import main

PROMPTS = [
    {"id": "chat-a", "category": "chat", "prompt": "hello there"},
    {"id": "extract-a", "category": "extract",
     "prompt": "Repeat: the quick brown fox jumps over the lazy dog"},
    {"id": "chat-b", "category": "chat", "prompt": "what is speculative decoding?"},
]


@pytest.fixture
def prompts_file(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(json.dumps(p) for p in PROMPTS) + "\n")
    return path


def bench_json(tiny_config, prompts_file, *extra, command: tuple[str, ...] = ()):
    result = CliRunner().invoke(main, ["bench", *command, "--config", str(tiny_config),
                                       "--prompts", str(prompts_file), "--max-new-tokens", "12",
                                       "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("pair", ["tiny", "tiny-ngram"])
def test_bench_report_has_every_arm_prompt_and_category(tiny_config, prompts_file, pair):
    report = bench_json(tiny_config, prompts_file, "--pair", pair)
    assert list(report["arms"]) == ["spec", "target", "hf", "hf_spec"]
    assert [p["id"] for p in report["prompts"]] == ["chat-a", "extract-a", "chat-b"]
    assert set(report["categories"]) == {"chat", "extract"}
    assert report["categories"]["chat"]["prompts"] == 2
    total = report["total"]
    for key in report["arms"]:
        assert total["arms"][key]["tokens"] > 0
        assert total["arms"][key]["tokens_per_s"] > 0
    assert set(total["ratios"]) >= {"spec/target", "spec/hf_spec", "target/hf"}
    assert total["arms"]["spec"]["drafted"] is None or total["arms"]["spec"]["acceptance_rate"] <= 1


def test_bench_flags_greedy_outputs_identical_to_target_only(tiny_config, prompts_file):
    report = bench_json(tiny_config, prompts_file, "--pair", "tiny")
    for key in ("spec", "hf", "hf_spec"):
        assert report["total"]["arms"][key]["identical"] == {"identical": 3, "answers": 3}
        for prompt in report["prompts"]:
            assert prompt["arms"][key]["first_difference"] is None
    assert report["total"]["arms"]["spec"]["drafted"] > 0


def test_bench_counts_only_new_tokens(tiny_config, prompts_file):
    report = bench_json(tiny_config, prompts_file, "--pair", "tiny-self")
    for prompt in report["prompts"]:
        for arm in prompt["arms"].values():
            assert 1 <= arm["tokens"] <= 12
    assert report["total"]["arms"]["spec"]["acceptance_rate"] == 1.0


def test_a_spent_budget_ends_the_run_between_prompts_and_the_report_says_how_many_were_left(
        tiny_config, prompts_file, monkeypatch):
    """`--budget-s` (a lent GPU's minutes): no prompt starts once the budget is spent, each
    prompt begun is answered by every arm, and both reports say what was left."""
    import itertools
    import types

    from specchat.commands import bench as bench_command

    ticks = itertools.count(0, 100)  # each reading of the command's clock 100 s after the last
    monkeypatch.setattr(bench_command, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))
    report = bench_json(tiny_config, prompts_file, "--pair", "tiny", "--budget-s", "150")
    assert [p["id"] for p in report["prompts"]] == ["chat-a", "extract-a"]  # at 100 s, not 200
    assert report["prompt_count"] == 2 and report["prompts_left"] == 1
    assert all(set(p["arms"]) == set(report["arms"]) for p in report["prompts"])
    result = CliRunner().invoke(main, ["bench", "--config", str(tiny_config), "--prompts",
                                       str(prompts_file), "--max-new-tokens", "6", "--budget-s", "150"])
    assert result.exit_code == 0 and "--budget-s spent: 2 of 3 prompts answered" in result.stdout
    assert bench_json(tiny_config, prompts_file, "--pair", "tiny")["prompts_left"] == 0


def test_bench_prints_tables_per_prompt_category_and_total(tiny_config, prompts_file):
    result = CliRunner().invoke(main, ["bench", "--config", str(tiny_config), "--prompts",
                                       str(prompts_file), "--max-new-tokens", "6"])
    assert result.exit_code == 0, result.output
    for needle in ("per prompt:", "extract-a", "per category and total:", "TOTAL",
                   "spec/tgt", "spec 3/3"):
        assert needle in result.stdout


@pytest.mark.parametrize("content, expected", [
    ("not json\n", "not valid JSON"),
    ('{"id": "a", "category": "chat"}\n', "'prompt' must be a non-empty string"),
    ('[1, 2]\n', "expected a JSON object"),
    ("\n\n", "holds no prompts"),
    ('{"id": "a", "category": "c", "prompt": "x"}\n{"id": "a", "category": "c", "prompt": "y"}\n',
     "appears twice"),
])
def test_bad_prompt_files_are_one_line_errors(tiny_config, tmp_path, content, expected):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    result = CliRunner().invoke(main, ["bench", "--config", str(tiny_config), "--prompts", str(path)])
    assert result.exit_code == 2
    assert expected in result.output
    assert str(path) in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_missing_prompt_file_is_a_one_line_error(tiny_config, tmp_path):
    result = CliRunner().invoke(main, ["bench", "--config", str(tiny_config), "--prompts",
                                       str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2 and "does not exist" in result.output


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7])
def test_over_a_cycle_every_arm_runs_in_every_place_and_after_every_other_arm_equally_often(n):
    """An arm pays for what ran before it (llama-cpp-python's generate left specchat's next
    answer 3% slower): the order must not give an arm the same predecessor every time."""
    from collections import Counter

    from specchat.bench.runner import in_design_order, williams_orders

    arms = [f"arm{i}" for i in range(n)]
    cycle = [in_design_order(arms, turn) for turn in range(len(williams_orders(n)))]
    assert all(sorted(order) == arms for order in cycle)
    places = Counter((place, arm) for order in cycle for place, arm in enumerate(order))
    assert len(set(places.values())) == 1 and len(places) == n * n
    follows = Counter(pair for order in cycle for pair in zip(order, order[1:]))
    assert len(set(follows.values())) == 1 and len(follows) == n * (n - 1)


def test_repeats_interleave_the_arms_and_keep_each_arms_median_run():
    from specchat.bench.arms import ArmRun
    from specchat.bench.prompts import BenchPrompt
    from specchat.bench.runner import run_prompts

    calls = []

    class Timed:
        def __init__(self, key, times):
            self.key, self.label, self.speculative, self.times = key, key, False, iter(times)

        def run(self, prompt, max_new_tokens):
            calls.append(self.key)
            seconds = 0.0 if max_new_tokens == 8 else next(self.times)  # the warm-up takes no time
            return ArmRun([1] * 4, seconds)

    class Tokenizer:
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [1, 2, 3]}

    arms = [Timed("a", [1.0, 9.0, 2.0]), Timed("b", [5.0, 4.0, 6.0])]
    prompt = BenchPrompt("p1", "chat", "hello")
    [result] = run_prompts(arms, Tokenizer(), [prompt], 96, repeats=3)
    assert calls[2:] == ["a", "b", "b", "a", "a", "b"]  # interleaved, the rotation going on
    assert result.runs["a"].seconds == 2.0 and result.runs["b"].seconds == 5.0


@pytest.mark.parametrize("k", [2, 5])
def test_transformers_assisted_generation_drafts_the_k_it_is_compared_at(k):
    """transformers reads the draft length from the assistant's generation config; given to
    `generate` it is ignored (20 drafts a round, cut at confidence 0.4: a random tiny draft
    stops after one). Counted as the draft's forwards between two of the target's."""
    from tiny import build_model

    from specchat.models.torch_backend.baselines import BaselineSettings, Speculation, hf_generate

    target, draft = build_model(320, seed=0), build_model(320, layers=1, seed=0)
    calls = []
    for name, model in (("T", target), ("d", draft)):
        forward = model.forward
        model.forward = lambda *a, _f=forward, _n=name, **kw: calls.append(_n) or _f(*a, **kw)
    before = draft.generation_config.to_dict()
    new = hf_generate(target, list(range(5, 30)), BaselineSettings(40, (2,)),
                      Speculation(assistant=draft, draft_tokens=k))
    rounds = [len(run) for run in "".join(calls).split("T")[1:-1]]
    # k a round but where the answer's end (or a drafted EOS) leaves room for fewer
    assert len(new) == 40 and max(rounds) == k and rounds.count(k) >= 0.75 * len(rounds), rounds
    assert draft.generation_config.to_dict() == before  # restored for the next arm


def test_bench_captures_the_attention_spans_its_answers_reach_before_timing_and_no_more(
        tiny_config, prompts_file, monkeypatch):
    """A static cache's steps are captured per attention span (256, 512, ...) before timing,
    so no capture lands inside a timed answer; a span the answers never reach costs a GPU
    load as much as one they do."""
    from specchat.models.torch_backend.static_llama import StaticLlama

    spans: dict[str, set[int]] = {"prepare": set(), "answers": set()}
    phase = ["answers"]
    run, prepare = StaticLlama._run, StaticLlama.prepare

    def spans_run(self, ids, width, captured):
        out = run(self, ids, width, captured)
        spans[phase[0]].add(self._span)
        return out

    def phased_prepare(self, *args, **kwargs):
        phase[0] = "prepare"
        try:
            return prepare(self, *args, **kwargs)
        finally:
            phase[0] = "answers"

    monkeypatch.setattr(StaticLlama, "_run", spans_run)
    monkeypatch.setattr(StaticLlama, "prepare", phased_prepare)
    static = tiny_config.parent / "static.toml"
    static.write_text(tiny_config.read_text().replace('[pairs.tiny]\n',
                                                      '[pairs.tiny]\ntorch_forward = "static"\n'))
    report = bench_json(static, prompts_file, "--pair", "tiny")
    assert report["total"]["arms"]["spec"]["tokens"] > 0
    assert spans["prepare"] == {256}  # the tiny model's spans are 256 and 512
    assert spans["answers"] and spans["answers"] <= spans["prepare"]


def test_bench_turns_reads_only_the_follow_ups_tokens_when_the_caches_are_kept(
        tiny_config, prompts_file):
    """Each prompt's follow-up, answered as the chat answers it (the caches keep the first
    exchange) and from empty caches: the kept arm reads fewer tokens, and both answer the
    same tokens (greedy, in float32)."""
    report = bench_json(tiny_config, prompts_file, "--pair", "tiny", command=("turns",))
    assert list(report["arms"]) == ["kept", "read"]
    assert [p["id"] for p in report["prompts"]] == ["chat-a", "extract-a", "chat-b"]
    for prompt in report["prompts"]:
        kept, read = prompt["kept"], prompt["read"]
        assert read["kept_tokens"] == 0 < kept["kept_tokens"]
        assert kept["prompt_tokens"] == read["prompt_tokens"] and prompt["identical"]
    total = report["total"]
    assert total["identical"] == 3 and total["read_tokens"]["kept"] < total["read_tokens"]["read"]
    assert set(report["categories"]) == {"chat", "extract"}
