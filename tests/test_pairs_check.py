"""`specchat pairs --check NAME [--measure]` (commands/advice.py): memory per model from
its files (GGUF headers too), v(n), c and the break-even α of each k from the one cost
model (engine/costs.py, engine/theory.py), which drafter can pay here, and what the pair
would gain where a verify costs about one step."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from specchat.cli import main
from specchat.engine.params import K_MAX
from specchat.engine.theory import break_even_alpha, cheapest_break_even, ideal_speedup, speedup_at
from specchat.sizes import size_text


def check(config, *args):
    return CliRunner().invoke(main, ["pairs", "--config", str(config), "--check", *args])


def row(output: str, name: str) -> list[str]:
    """The cells of the table row that starts with `name`."""
    line = next(line for line in output.splitlines() if line.split()[:1] == [name])
    return line.split()[1:]


def verdict_or_withheld(output: str, verdict: str) -> bool:
    """Real timings of tiny models give `verdict`, or on a busy machine withhold it (that
    choice is tests/test_cost_timing.py's, on a fake clock)."""
    if "verdict withheld: the machine is busy" in output:
        return "rerun on a quiet machine" in output and "which drafter" not in output
    return re.search(verdict, output) is not None


def test_break_even_alpha_is_where_speculation_starts_to_pay():
    even = break_even_alpha(3, 0.2, lambda n: 1.0 if n == 1 else 1.1)
    assert 0 < even < 1
    assert ideal_speedup(even - 0.01, 3, 0.2, 1.1) < 1 < ideal_speedup(even + 0.01, 3, 0.2, 1.1)


def test_the_cheapest_break_even_is_the_k_that_pays_at_the_lowest_acceptance():
    def v(n):  # a CPU-like verify: each extra token costs 0.3 of a step
        return 1 + 0.3 * (n - 1)
    k, alpha = cheapest_break_even(0.1, v, 8)
    for other in range(1, 9):
        assert speedup_at(alpha - 0.01, other, 0.1, v) < 1.0  # no k pays just below it
    assert speedup_at(alpha + 0.01, k, 0.1, v) > 1.0
    assert cheapest_break_even(0.0, lambda n: float(n), 8) is None  # a verify of n costs n steps


def test_check_sizes_both_models_and_predicts_one_step_verifies(tiny_config, load_tiny):
    result = check(tiny_config, "tiny")
    assert result.exit_code == 0, result.output
    pair = load_tiny("tiny")
    millions = sum(p.numel() for p in pair.target.model.parameters()) / 1e6
    assert re.search(rf"target .*: {millions:.1f}M parameters", result.output)
    assert re.search(r"draft .*M parameters", result.output)
    assert "predicted from weight bytes" in result.output
    assert row(result.output, "n") == ["1", "2", "3", "4"]  # k = 3: v(n) for n = 1..k + 1
    assert row(result.output, "v(n)") == ["1.00"] * 4
    assert len(row(result.output, "α")) == 3  # a break-even α for k = 1..3
    assert "which drafter can pay here" in result.output
    assert "n-gram lookup (c = 0.00): pays at any acceptance" in result.output
    assert re.search(r"here at α = 0\.\d\d \(assumed\): best k = \d", result.output)


def test_a_draft_as_costly_as_its_target_cannot_pay(tiny_config):
    result = check(tiny_config, "tiny-self")  # the target as its own draft: c = 1
    assert result.exit_code == 0, result.output
    assert re.search(r"draft \S+ \(c = 1\.00\): cannot pay", result.output)
    assert row(result.output, "α") == ["never"] * 4
    assert "here at α = 0.80 (assumed): best k = 0, plain decoding" in result.output


def test_check_measure_times_the_loaded_pair_and_shows_the_one_step_gain(tiny_config):
    result = check(tiny_config, "tiny", "--measure")
    assert result.exit_code == 0, result.output
    assert "measured on cpu: median of" in result.output
    assert row(result.output, "v(n)")[0] == "1.00" and len(row(result.output, "v(n)")) == 4
    assert re.search(r"draft step c = \d+\.\d\d target steps", result.output)
    assert "where a verify costs about one step (a GPU, Apple silicon): v(n) = 1" in result.output
    assert re.search(r"  there at α = 0\.\d\d \(assumed\): best k = \d", result.output)


def test_check_of_an_ngram_pair_judges_the_lookup_alone(tiny_config):
    result = check(tiny_config, "tiny-ngram")
    assert result.exit_code == 0, result.output
    drafters = result.output.split("which drafter can pay here:")[1]
    assert "draft ngram" not in drafters and "n-gram lookup (c = 0.00)" in drafters
    assert row(result.output, "n") == ["1", "2", "3", "4", "5"]  # k = 4


def test_check_of_a_plain_pair_predicts_nothing(tiny_config):
    result = check(tiny_config, "tiny-plain")
    assert result.exit_code == 0 and "no draft (k = 0)" in result.output


def test_check_of_an_unknown_pair_is_a_one_line_error(tiny_config):
    result = check(tiny_config, "nope")
    assert result.exit_code == 2 and "unknown pair 'nope'" in result.output


# --- a GGUF target on llama.cpp with a torch draft, as the built-in default pair ----------

@pytest.fixture(scope="module")
def gguf_config(tmp_path_factory) -> Path:
    from gguf_tiny import tiny_gguf_with_draft

    root = tmp_path_factory.mktemp("check-gguf")
    target, draft = tiny_gguf_with_draft(root)
    toml = root / "models.toml"
    toml.write_text(f'[pairs.g]\ntarget = "{target}"\ndraft = "{draft}"\nk = "auto"\n'
                    f'backend = "llama.cpp"\n'
                    f'[pairs.g-ngram]\ntarget = "{target}"\ndraft = "ngram"\nk = 2\n'
                    f'backend = "llama.cpp"\n'
                    f'[pairs.g-int8]\ntarget = "{target}"\ndraft = "{draft}"\nk = "auto"\n')
    return toml


def test_a_gguf_target_is_sized_from_its_header_as_llamacpp_runs_it(gguf_config):
    import gguf

    from specchat.models.device.estimate import params_label

    target = Path(re.search(r'target = "(.+)"', gguf_config.read_text()).group(1))
    tensors = gguf.GGUFReader(str(target)).tensors
    result = check(gguf_config, "g")
    assert result.exit_code == 0, result.output
    assert "target on llama.cpp (the GGUF file's own types), draft on torch" in result.output
    label = params_label(sum(int(t.n_elements) for t in tensors))  # the file names no size
    size = sum(int(t.n_bytes) for t in tensors)
    assert re.search(rf"target .*: {label} parameters, weights {size_text(size)}", result.output)
    assert "[GGUF header]" in result.output and "placement: llama.cpp decodes on the CPU" in result.output
    assert f"k = auto: shown for k = 1..{K_MAX}" in result.output  # the one maximum of k
    assert len(row(result.output, "v(n)")) == K_MAX + 1  # predicted: every width, v(n) = 1


def test_an_int8_target_is_sized_as_the_loaded_model_holds_it_and_measures_a_flat_verify(
        gguf_config):
    """`auto` runs this speculating GGUF pair on int8: its weights are sized as the loaded
    model holds them (int8 rows and their scales, on fbgemm for a model this small), and
    --measure times the int8 forwards."""
    from specchat.models.int8 import convert
    from specchat.models.int8.model import Int8Model

    target = Path(re.search(r'target = "(.+)"', gguf_config.read_text()).group(1))
    found = convert.converted(target)
    count = Int8Model(found.arch, found.tensors).parameter_bytes
    result = check(gguf_config, "g-int8")
    assert result.exit_code == 0, result.output
    assert "target on int8 (fbgemm, 8-bit activation rows), draft on int8" in result.output
    assert "placement: the int8 backend computes on the CPU" in result.output
    assert re.search(rf"target .*: \S+ parameters, weights {size_text(count)}", result.output)
    assert "about what the int8 backend's verify costs on a CPU" in result.output
    measured = check(gguf_config, "g-int8", "--measure")
    assert measured.exit_code == 0, measured.output
    assert len(row(measured.output, "v(n)")) >= 2


def test_the_label_and_the_load_choose_an_int8_kernel_from_the_same_count(gguf_config,
                                                                          monkeypatch):
    """A target near the 1B threshold between fbgemm and oneDNN: `pairs --check` names the
    kernel from the GGUF header's count, and the load must pack for the same one (it counted
    its converted matrices, tied embedding twice, until 2026-11-27)."""
    from specchat.models.backend_int8 import Int8Support
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    asked: dict[str, list[int]] = {"check": [], "load": []}
    phase = ["check"]
    choose = Int8Support.kernel_for
    monkeypatch.setattr(Int8Support, "kernel_for",
                        lambda self, parameters, progress=None: asked[phase[0]].append(parameters)
                        or choose(self, parameters))
    assert check(gguf_config, "g-int8").exit_code == 0
    phase[0] = "load"
    load_pair(load_catalog(gguf_config).get("g-int8"))
    assert asked["check"] and asked["load"] and set(asked["check"]) == set(asked["load"])


def test_a_gguf_pair_measures_on_llamacpp(gguf_config):
    result = check(gguf_config, "g-ngram", "--measure")
    assert result.exit_code == 0, result.output
    costs = [float(cell) for cell in row(result.output, "v(n)")]
    assert costs[0] == 1.0 and costs == sorted(costs) and len(costs) == 3
    assert verdict_or_withheld(result.output, r"n-gram lookup \(c = 0\.\d\d\): (pays|cannot pay)")
    assert "where a verify costs about one step" in result.output

