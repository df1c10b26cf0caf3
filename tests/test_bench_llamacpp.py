"""llama.cpp's own arms of `bench` (bench/llamacpp_arms.py) on a tiny GGUF target:
llama.cpp's generate loop, its prompt lookup and its draft hook fed by a GGUF draft
answer within the token budget with the same greedy text as specchat target-only on
the same file; `bench_arms` picks llama.cpp's baselines for a llama.cpp pair and
transformers' for a torch pair; the report and its table name the llama.cpp ratios."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

MAX_NEW = 12


@pytest.fixture(scope="module")
def gguf_pairs(tmp_path_factory) -> Path:
    """models.toml: the tiny GGUF target (float32) with an n-gram draft, and with a
    distilled-format draft of it."""
    from gguf_tiny import tiny_gguf_with_draft

    root = tmp_path_factory.mktemp("bench-gguf")
    target, draft = tiny_gguf_with_draft(root, layers=3, int8=False)
    toml = root / "models.toml"
    toml.write_text(f'default = "g-ngram"\n[pairs.g-ngram]\ntarget = "{target}"\ndraft = "ngram"\n'
                    f'k = 3\ndtype = "float32"\nbackend = "llama.cpp"\n[pairs.g-draft]\n'
                    f'target = "{target}"\ndraft = "{draft}"\nk = 2\ndtype = "float32"\n'
                    f'backend = "llama.cpp"\n')
    return toml


def load(toml: Path, name: str):
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    return load_pair(load_catalog(toml).get(name))


def run(pair, arms, prompts=("Say hello.", "Write code.")):
    from specchat.bench.prompts import BenchPrompt
    from specchat.bench.runner import run_prompts

    bench_prompts = [BenchPrompt(f"p{i}", "chat", text) for i, text in enumerate(prompts)]
    return run_prompts(arms, pair.tokenizer, bench_prompts, MAX_NEW)


def settings(pair):
    from specchat.engine import SamplingParams, Settings

    return Settings(pair.config.k, SamplingParams())


@pytest.mark.parametrize("name", ["g-ngram", "g-draft"])
def test_llama_cpp_arms_answer_within_budget_with_specchat_target_onlys_greedy_text(
        gguf_pairs, name):
    from specchat.bench.llamacpp_arms import llamacpp_arms, specchat_arms

    pair = load(gguf_pairs, name)
    arms = specchat_arms(pair, settings(pair)) + llamacpp_arms(pair, settings(pair))
    assert [arm.key for arm in arms] == ["spec", "target", "llama", "llama_spec"]
    for result in run(pair, arms):
        reference = result.runs["target"].tokens
        assert 0 < len(reference) <= MAX_NEW
        assert len(reference) == MAX_NEW or reference[-1] in pair.eos_ids
        for key in ("llama", "llama_spec"):
            assert result.runs[key].tokens == reference, key
            assert result.runs[key].seconds > 0


def test_llama_cpp_draft_hook_drafts_k_tokens_from_the_gguf_draft(gguf_pairs):
    import numpy as np

    from specchat.bench.llamacpp_arms import gguf_path
    from specchat.models.llamacpp.baselines import gguf_draft_model, llama_generate, open_llama

    pair = load(gguf_pairs, "g-draft")
    path = gguf_path(pair.config.draft)
    drafter = gguf_draft_model(path, 3, threads=1)
    prompt = [5, 6, 7, 8, 9]
    plain = llama_generate(open_llama(path, 1), prompt, 3, set())
    assert drafter(np.array(prompt, dtype=np.intc)).tolist() == plain
    longer = prompt + plain[:1]
    assert drafter(np.array(longer, dtype=np.intc)).tolist() == llama_generate(
        open_llama(path, 1), longer, 3, set())


def test_the_bindings_arms_put_the_layers_where_specchats_target_has_them(gguf_pairs,
                                                                         monkeypatch):
    """On a GPU build specchat's target offloads every layer: llama.cpp's own arms (generate,
    speculation with the GGUF draft) must run there too, not race it from the CPU."""
    import llama_cpp

    from specchat.bench.llamacpp_arms import llamacpp_arms

    pair = load(gguf_pairs, "g-draft")
    pair.target.gpu_layers, pair.target.main_gpu = -1, 1  # as a CUDA build places them
    opened = []
    monkeypatch.setattr(llama_cpp, "Llama", lambda path, **kwargs: opened.append(kwargs) or object())
    assert [arm.key for arm in llamacpp_arms(pair, settings(pair))] == ["llama", "llama_spec"]
    assert len(opened) == 3  # the target twice (plain, speculative), the draft once
    assert all(o["n_gpu_layers"] == -1 and o["main_gpu"] == 1
               and o["split_mode"] == llama_cpp.LLAMA_SPLIT_MODE_NONE for o in opened)
    pair.target.gpu_layers, pair.target.main_gpu = 0, None  # this machine: the CPU
    opened.clear()
    llamacpp_arms(pair, settings(pair))
    assert all(o["n_gpu_layers"] == 0 and "main_gpu" not in o for o in opened)


def test_bench_picks_llama_cpp_baselines_only_for_a_llama_cpp_pair(load_tiny):
    from specchat.bench.llamacpp_arms import bench_arms, is_llamacpp_pair

    pair = load_tiny("tiny-ngram")  # a transformers folder: always the torch backend
    assert not is_llamacpp_pair(pair)
    assert [a.key for a in bench_arms(pair, settings(pair))] == ["spec", "target", "hf", "hf_spec"]
    fake_target = type("LlamaCppModel", (), {"__module__": "specchat.models.llamacpp.model"})()
    assert is_llamacpp_pair(SimpleNamespace(target=fake_target))


def test_bench_gives_a_llama_cpp_pair_specchat_arms_then_llama_cpp_arms(gguf_pairs):
    from specchat.bench.llamacpp_arms import bench_arms

    pair = load(gguf_pairs, "g-ngram")
    fake_target = type("LlamaCppModel", (), {"__module__": "specchat.models.llamacpp.model"})()
    as_llama = SimpleNamespace(**{**vars(pair), "target": fake_target})
    as_llama.eos_ids, as_llama.has_draft = pair.eos_ids, pair.has_draft  # properties of LoadedPair
    keys = [a.key for a in bench_arms(as_llama, settings(pair))]
    assert keys == ["spec", "target", "llama", "llama_spec"]


def test_a_sweep_of_a_llamacpp_target_with_a_torch_draft_runs_without_transformers_arms(gguf_pairs):
    """transformers' heuristic schedule needs the target's transformers model; a llama.cpp
    target has none (the GPU campaign's dry run found `bench profile` crashing here)."""
    from specchat.bench.arms import sweep_arms
    from specchat.engine import SamplingParams

    pair = load(gguf_pairs, "g-draft")
    assert pair.backends["target"].startswith("llama.cpp") and pair.backends["draft"].startswith("torch")
    arms = sweep_arms(pair, SamplingParams(), [1, 2])
    assert [a.key for a in arms] == ["target", "k1", "k2", "auto"]
    results = run(pair, arms, prompts=("Say hello.",))
    assert all(len(run_.tokens) > 0 for run_ in results[0].runs.values())


def test_report_table_shows_llama_cpp_ratios_for_llama_cpp_arms(gguf_pairs):
    from specchat.bench.format import format_report
    from specchat.bench.llamacpp_arms import llamacpp_arms, specchat_arms
    from specchat.bench.tables import build_tables

    pair = load(gguf_pairs, "g-ngram")
    arms = specchat_arms(pair, settings(pair)) + llamacpp_arms(pair, settings(pair))
    results = run(pair, arms, prompts=("Say hello.",))
    meta = {"pair": "g-ngram", "draft": "ngram", "k": 3, "device": "cpu", "dtype": "float32",
            "max_new_tokens": MAX_NEW, "temperature": 0.0}
    report = meta | build_tables({a.key: a.label for a in arms}, results, greedy=True)
    total = report["total"]
    assert total["arms"]["llama"]["identical"] == {"identical": 1, "answers": 1}
    assert {"target/llama", "spec/llama_spec", "llama_spec/llama"} <= set(total["ratios"])
    text = format_report(report)
    assert "tgt/lcpp" in text and "spec/lcpp-spec" in text and "lcpp = llama.cpp generate" in text


def test_the_report_names_the_time_spent_outside_llama_cpp_per_token(gguf_pairs):
    """Every specchat arm on a llama.cpp pair counts its time inside llama_decode; the report
    gives the rest per token, which is specchat's own work, less than a token's whole time."""
    from specchat.bench.format import format_report
    from specchat.bench.llamacpp_arms import specchat_arms
    from specchat.bench.tables import build_tables

    pair = load(gguf_pairs, "g-ngram")
    arms = specchat_arms(pair, settings(pair))
    results = run(pair, arms, prompts=("Say hello.",))
    for arm in ("spec", "target"):
        inside = results[0].runs[arm].inside_llama_s
        assert 0 < inside < results[0].runs[arm].seconds
    meta = {"pair": "g-ngram", "draft": "ngram", "k": 3, "device": "cpu", "dtype": "float32",
            "max_new_tokens": MAX_NEW, "temperature": 0.0}
    report = meta | build_tables({a.key: a.label for a in arms}, results, greedy=True)
    target = report["total"]["arms"]["target"]
    per_token_ms = 1000 * target["seconds"] / target["tokens"]
    assert 0 < target["outside_llama_ms_per_token"] < per_token_ms
    assert "time outside llama.cpp per token" in format_report(report)


def test_no_time_outside_llama_cpp_is_claimed_for_an_arm_with_a_torch_model(load_tiny):
    from specchat.bench.llamacpp_arms import specchat_arms

    pair = load_tiny("tiny")
    arms = specchat_arms(pair, settings(pair))
    assert all(arm.llama_models() == [] for arm in arms)
    assert run(pair, arms[:1], prompts=("Hi.",))[0].runs["spec"].inside_llama_s is None


def test_break_even_alpha_is_where_expected_tokens_pay_for_the_round():
    from specchat.engine.costs import Costs
    from specchat.engine.theory import break_even_alpha, expected_tokens_per_round

    costs = Costs(0.010, 0.001, {n: 0.010 * (1 + 0.25 * (n - 1)) for n in range(1, 9)})
    for k in (1, 2, 3, 4):
        alpha = break_even_alpha(k, costs.c, costs.v)
        round_cost = k * costs.c + costs.v(k + 1)
        assert 0 < alpha < 1
        assert abs(expected_tokens_per_round(alpha, k) - round_cost) < 1e-4
    free = Costs(0.010, 0.0, {n: 0.010 for n in range(1, 9)})
    assert break_even_alpha(2, free.c, free.v) == 0.0
    ruinous = Costs(0.010, 0.010, {n: 0.010 * n for n in range(1, 9)})
    assert break_even_alpha(2, ruinous.c, ruinous.v) is None


def test_llama_cpp_costs_time_every_fixed_ks_verify_width_with_a_gguf_draft(gguf_pairs):
    from specchat.bench.llamacpp_arms import gguf_path
    from specchat.bench.llamacpp_profile import cost_report, cost_table, llamacpp_costs
    from specchat.engine.params import K_MAX

    pair = load(gguf_pairs, "g-draft")
    context = list(range(3, 53))
    costs = llamacpp_costs(gguf_path(pair.config.target), context, 1,
                           draft=gguf_path(pair.config.draft), repeats=1)
    assert sorted(costs.verify_s) == list(range(1, K_MAX + 2))
    assert all(s > 0 for s in costs.verify_s.values()) and costs.draft_step_s > 0
    report = cost_report(costs)
    assert report["v"][1] == 1.0 and set(report["break_even_alpha"]) == {1, 2, 3, 4}
    text = cost_table({"llama.cpp": report}, len(context))
    assert "llama.cpp v" in text and "break-even" in text


def test_timing_a_forward_leaves_the_cache_at_the_context(gguf_pairs):
    import numpy as np

    from specchat.bench.llamacpp_arms import gguf_path
    from specchat.bench.llamacpp_profile import forward_seconds
    from specchat.models.llamacpp.baselines import open_llama

    path = gguf_path(load(gguf_pairs, "g-ngram").config.target)
    context = list(range(3, 40))
    timed = open_llama(path, 1, n_ctx=128, logits_all=True)
    forward_seconds(timed, context, 8, repeats=2)
    timed.eval([17])
    fresh = open_llama(path, 1, n_ctx=128, logits_all=True)
    fresh.eval(context + [17])
    assert np.allclose(timed.scores[len(context)], fresh.scores[len(context)], atol=1e-4)
