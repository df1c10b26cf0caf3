"""`specchat pairs --check NAME` (commands/advice.py): memory per model from the files,
step costs predicted or measured, and the cost model's verdict at the draft's α."""

from __future__ import annotations

import re

from click.testing import CliRunner

from specchat.cli import main
from specchat.commands.advice import StepCosts, break_even_alpha, verdict_lines
from specchat.engine.theory import ideal_speedup


def check(tiny_config, *args):
    return CliRunner().invoke(main, ["pairs", "--config", str(tiny_config), "--check", *args])


def test_break_even_alpha_is_where_speculation_starts_to_pay():
    costs = StepCosts(0.2, 1.1, "test")
    even = break_even_alpha(3, costs)
    assert 0 < even < 1
    assert ideal_speedup(even - 0.01, 3, 0.2, 1.1) < 1 < ideal_speedup(even + 0.01, 3, 0.2, 1.1)


def test_a_draft_as_costly_as_its_target_never_pays():
    costs = StepCosts(1.0, 1.0, "test")
    assert break_even_alpha(4, costs) is None
    lines = verdict_lines(4, costs, 0.9, "given")
    assert "LOSE" in lines[1] and "too much" in lines[-1]


def test_check_sizes_both_models_and_gives_a_verdict(tiny_config, load_tiny):
    result = check(tiny_config, "tiny")
    assert result.exit_code == 0, result.output
    pair = load_tiny("tiny")
    millions = sum(p.numel() for p in pair.target.model.parameters()) / 1e6
    assert re.search(rf"target .*: {millions:.1f}M parameters", result.output)
    assert re.search(r"draft .*M parameters", result.output)
    assert "predicted from weight bytes" in result.output
    assert re.search(r"at α = 0\.\d\d, k = 3: ideal speedup \d+\.\d\dx", result.output)
    assert "break-even" in result.output


def test_check_measure_times_the_loaded_pair(tiny_config):
    result = check(tiny_config, "tiny", "--measure")
    assert result.exit_code == 0, result.output
    assert "measured: median of" in result.output
    assert re.search(r"c = \d+\.\d\d, verify of 4 tokens v = \d+\.\d\d", result.output)


def test_check_of_a_plain_pair_predicts_nothing(tiny_config):
    result = check(tiny_config, "tiny-plain")
    assert result.exit_code == 0 and "no draft (k = 0)" in result.output


def test_check_of_an_unknown_pair_is_a_one_line_error(tiny_config):
    result = check(tiny_config, "nope")
    assert result.exit_code == 2 and "unknown pair 'nope'" in result.output
