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
    from gguf_tiny import write_tiny_draft, write_tiny_gguf

    root = tmp_path_factory.mktemp("bench-gguf")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECCHAT_CACHE_DIR", str(root / "cache"))
        target = write_tiny_gguf(root / "target", layers=3)
        draft = write_tiny_draft(target, root / "draft", int8=False, vocab_every=0)
    toml = root / "models.toml"
    toml.write_text(f'default = "g-ngram"\n[pairs.g-ngram]\ntarget = "{target}"\ndraft = "ngram"\n'
                    f'k = 3\ndtype = "float32"\n[pairs.g-draft]\ntarget = "{target}"\n'
                    f'draft = "{draft}"\nk = 2\ndtype = "float32"\n')
    return toml


def load(toml: Path, name: str):
    from specchat.models.config import load_catalog
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
    from specchat.models.llamacpp_baselines import gguf_draft_model, llama_generate, open_llama

    pair = load(gguf_pairs, "g-draft")
    path = gguf_path(pair.config.draft)
    drafter = gguf_draft_model(path, 3, threads=1)
    prompt = [5, 6, 7, 8, 9]
    plain = llama_generate(open_llama(path, 1), prompt, 3, set())
    assert drafter(np.array(prompt, dtype=np.intc)).tolist() == plain
    longer = prompt + plain[:1]
    assert drafter(np.array(longer, dtype=np.intc)).tolist() == llama_generate(
        open_llama(path, 1), longer, 3, set())


def test_bench_picks_llama_cpp_baselines_only_for_a_llama_cpp_pair(gguf_pairs):
    from specchat.bench.llamacpp_arms import bench_arms, is_llamacpp_pair

    pair = load(gguf_pairs, "g-ngram")
    assert not is_llamacpp_pair(pair)
    assert [a.key for a in bench_arms(pair, settings(pair))] == ["spec", "target", "hf", "hf_spec"]
    fake_target = type("LlamaCppModel", (), {"__module__": "specchat.models.llamacpp"})()
    as_llama = SimpleNamespace(**{**vars(pair), "target": fake_target})
    as_llama.eos_ids = pair.eos_ids
    assert is_llamacpp_pair(as_llama)
    keys = [a.key for a in bench_arms(as_llama, settings(pair))]
    assert keys == ["spec", "target", "llama", "llama_spec"]


def test_report_table_shows_llama_cpp_ratios_for_llama_cpp_arms(gguf_pairs):
    from specchat.bench.format import format_report
    from specchat.bench.llamacpp_arms import llamacpp_arms, specchat_arms
    from specchat.bench.report import build_report

    pair = load(gguf_pairs, "g-ngram")
    arms = specchat_arms(pair, settings(pair)) + llamacpp_arms(pair, settings(pair))
    results = run(pair, arms, prompts=("Say hello.",))
    meta = {"pair": "g-ngram", "draft": "ngram", "k": 3, "device": "cpu", "dtype": "float32",
            "max_new_tokens": MAX_NEW, "temperature": 0.0}
    report = build_report(meta, {a.key: a.label for a in arms}, results, greedy=True)
    total = report["total"]
    assert total["arms"]["llama"]["identical"] == {"identical": 1, "answers": 1}
    assert {"target/llama", "spec/llama_spec", "llama_spec/llama"} <= set(total["ratios"])
    text = format_report(report)
    assert "tgt/lcpp" in text and "spec/lcpp-spec" in text and "lcpp = llama.cpp generate" in text
