"""`bench sweep`, `bench profile` and `bench synthetic` on tiny models: the sweep names a
best fixed k and compares auto with it; the profile reports c, v(1..16), α and
ideal next to measured speedups; synthetic shapes are built without downloads."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from specchat.cli import main
from specchat.engine.params import K_MAX


@pytest.fixture
def prompts_file(tmp_path):
    path = tmp_path / "p.jsonl"
    rows = [{"id": "x1", "category": "extract", "prompt": "Repeat: one two three one two three"},
            {"id": "c1", "category": "chat", "prompt": "hello"}]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


def invoke(*args):
    result = CliRunner().invoke(main, ["bench", *args])
    assert result.exit_code == 0, result.output
    return result


def test_k_sweep_names_the_best_fixed_k_and_compares_auto(tiny_config, prompts_file):
    out = invoke("sweep", "--config", str(tiny_config), "--pair", "tiny", "--prompts",
                 str(prompts_file), "--max-new-tokens", "10", "--ks", "2,3", "--json")
    report = json.loads(out.stdout)
    assert list(report["arms"]) == ["target", "k2", "k3", "auto", "hf_heuristic"]
    for name in ("extract", "chat", "TOTAL"):
        entry = report["sweep"][name]
        assert entry["best_k"] in (2, 3)
        assert entry["auto_vs_best"] > 0 and entry["hf_heuristic_vs_best"] > 0
    assert sum(report["auto_k_histogram"].values()) > 0
    assert report["total"]["arms"]["auto"]["identical"]["identical"] == 2


def test_profile_reports_costs_alpha_and_ideal_next_to_measured(tiny_config, prompts_file):
    out = invoke("profile", "--config", str(tiny_config), "--pair", "tiny-self", "--prompts",
                 str(prompts_file), "--max-new-tokens", "10", "--ks", "1,3", "--json")
    profile = json.loads(out.stdout)["profile"]
    assert set(profile["v"]) == {str(w) for w in range(1, K_MAX + 2)}  # every fixed k's k + 1
    assert profile["v"]["1"] == pytest.approx(1.0)
    assert profile["c"] > 0
    assert [r["k"] for r in profile["rows"]] == [1, 3]
    for row in profile["rows"]:  # self-draft: every draft accepted, so alpha is near 1
        assert row["alpha"] > 0.99 and row["measured_speedup"] > 0 and row["ideal_speedup"] > 0
    assert profile["best_k_ideal"] in (1, 3) and profile["best_k_measured"] in (1, 3)


def test_profile_text_names_the_best_k(tiny_config, prompts_file):
    out = invoke("profile", "--config", str(tiny_config), "--pair", "tiny-ngram", "--prompts",
                 str(prompts_file), "--max-new-tokens", "8", "--ks", "2")
    assert "cost model:" in out.stdout and "best k:" in out.stdout and "auto/best" in out.stdout


def test_synthetic_profile_builds_real_shapes_without_downloads(monkeypatch):
    from specchat.models.torch_backend import synthetic

    small = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                 num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    monkeypatch.setattr(synthetic, "SHAPES", {"s": small, "m": {**small, "hidden_size": 128}})
    monkeypatch.setattr(synthetic, "VOCAB", 512)
    out = invoke("synthetic", "s,m", "--layers", "2", "--dtype", "float32")
    assert "s ms" in out.stdout and "m v" in out.stdout
    assert "reduced depth" in out.stdout and "c(s->m)" in out.stdout


def test_unknown_synthetic_size_and_bad_k_list_are_one_line_errors(tiny_config, prompts_file):
    bad = CliRunner().invoke(main, ["bench", "synthetic", "70x"])
    assert bad.exit_code == 2 and "unknown synthetic model" in bad.output
    bad = CliRunner().invoke(main, ["bench", "sweep", "--config", str(tiny_config), "--prompts",
                                    str(prompts_file), "--ks", "two"])
    assert bad.exit_code == 2 and "--ks" in bad.output


def test_overhead_reports_the_share_outside_forwards(tiny_config, prompts_file):
    out = invoke("overhead", "--config", str(tiny_config), "--pair", "tiny", "--prompts",
                 str(prompts_file), "--max-new-tokens", "8", "--json")
    report = json.loads(out.stdout)
    for mode in ("speculative", "target_only"):
        entry = report["overhead"][mode]
        assert entry["rounds"] > 0 and 0 < entry["forward_s"] < entry["wall_s"]
        assert 0 < entry["outside_forward_share"] < 1
    assert "Name" in report["profiler_table"]


def test_bench_lists_its_subcommands_and_bare_bench_means_run():
    from specchat.commands.bench import bench

    assert set(bench.commands) == {"run", "acceptance", "sweep", "profile", "overhead",
                                   "turns", "synthetic"}
    listed = CliRunner().invoke(main, ["bench", "-h"]).output
    assert all(name in listed for name in bench.commands)
    bad = CliRunner().invoke(main, ["bench", "--limit", "0"])  # parsed by `bench run`
    assert bad.exit_code == 2 and "--limit" in bad.output


def test_a_backend_without_bench_arms_is_a_one_line_error():
    from types import SimpleNamespace

    from specchat.bench.comparison import comparison_arms
    from specchat.errors import UsageError

    pair = SimpleNamespace(config=SimpleNamespace(name="p"), backends={"target": "abacus (v1)"})
    with pytest.raises(UsageError, match="no arms for backend 'abacus'"):
        comparison_arms(pair, None)
