"""`bench --html FILE` (issue 26, item 2): one self-contained page with tokens/s per category
and arm as bars, and for `bench profile` v(n) against the break-even line."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from specchat.bench.html_report import to_html
from specchat.cli import main
from specchat.engine.theory import break_even_verify_cost, ideal_speedup


def test_the_break_even_verify_cost_is_where_drafting_stops_paying():
    # α = 0.5, k = 2: 1 + 0.5 + 0.25 = 1.75 tokens a round, less 2 drafts at c = 0.1
    assert break_even_verify_cost(0.5, 2, 0.1) == pytest.approx(1.55)
    assert ideal_speedup(0.5, 2, 0.1, verify_cost=1.55) == pytest.approx(1.0)
    assert ideal_speedup(0.5, 2, 0.1, verify_cost=1.5) > 1.0 > ideal_speedup(0.5, 2, 0.1, 1.6)


def report(**extra) -> dict:
    def group(spec: float, target: float) -> dict:
        return {"arms": {"spec": {"tokens_per_s": spec}, "target": {"tokens_per_s": target}}}

    return {"command": "specchat bench run --pair x", "pair": "x", "device": "cpu",
            "cpu_flags": "avx2 fma", "arms": {"spec": "specchat speculative",
                                              "target": "specchat target-only"},
            "categories": {"code": group(30.0, 10.0), "chat": group(12.0, 10.0)},
            "total": group(20.0, 10.0)} | extra


def bars(svg: str) -> list[float]:
    return [float(h) for h in re.findall(
        r'<rect [^>]*height="([0-9.]+)" class="rect reactive tooltip-trigger"', svg)]


def test_the_page_draws_each_category_and_arm_as_tall_as_its_rate():
    page = to_html(report())
    svg = re.search(r"<svg.*?</svg>", page, re.S).group(0)
    assert "tokens/s per category" in svg
    spec_code, spec_chat, spec_total, target_code, *_ = bars(svg)  # series by series
    assert spec_code == pytest.approx(3 * target_code, rel=0.01)
    assert spec_total == pytest.approx(2 * target_code, rel=0.01)
    assert "<td>30.0</td>" in page and "avx2 fma" in page
    assert "<script" not in page and "<!--" not in page
    assert "break-even" not in page  # no profile in a run


def test_a_profile_report_adds_v_n_against_the_break_even_line():
    profile = {"c": 0.1, "pooled_alpha": 0.5, "v": {"1": 1.0, "2": 1.05, "3": 1.1, "4": 1.2}}
    page = to_html(report(profile=profile))
    assert "break-even at the measured α = 0.50, c = 0.10" in page
    assert "break-even at α = 1 (every draft accepted)" in page


def test_bench_html_writes_the_page_and_checks_its_folder_first(tiny_config, tmp_path):
    page = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["bench", "run", "--config", str(tiny_config), "--pair", "tiny",
                                       "--limit", "2", "--max-new-tokens", "4", "--html", str(page)])
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert "tokens/s per category" in text and "specchat speculative" in text
    missing = CliRunner().invoke(main, ["bench", "--config", str(tiny_config), "--pair", "tiny",
                                        "--html", str(tmp_path / "nope" / "r.html")])
    assert missing.exit_code == 2 and "folder" in missing.output and "does not exist" in missing.output


def test_a_sweep_with_more_arms_than_tones_still_draws_every_arm():
    """bench sweep --ks 1,2,3,4 on a llama.cpp pair has 12 arms (target, k1..k4, auto,
    llama.cpp's own at each k, llama-bench): the page once ran out of colours and crashed
    after the whole run."""
    arms = {f"arm{i}": f"arm {i}" for i in range(14)}
    group = {"arms": {arm: {"tokens_per_s": 10.0 + i} for i, arm in enumerate(arms)}}
    page = to_html(report(arms=arms, categories={"code": group}, total=group))
    svg = re.search(r"<svg.*?</svg>", page, re.S).group(0)
    assert len(bars(svg)) == 2 * len(arms)  # code and total, every arm
