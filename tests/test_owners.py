"""One owner per number (issue 25): step costs and their timing (engine/costs.py), the
theory's formulas and the measured speedup (engine/theory.py), the k bounds and the
sampling settings (engine/params.py), the token kinds (specchat/token_kinds.py), and the
rendering of control characters (specchat/control_chars.py, issue 40). Every
other module imports them; these tests fail when a second copy creeps back."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from specchat.engine.params import AUTO_K_MAX, K_MAX, SamplingParams
from specchat.token_kinds import TOKEN_KINDS

PACKAGE = Path(__file__).resolve().parent.parent / "specchat"
DEVTOOLS = PACKAGE.parent / "devtools"


def sources() -> dict[str, str]:
    """specchat's modules by path relative to the package, and the developer tools' (which
    use the same owners) as devtools/..., with their text."""
    own = {str(f.relative_to(PACKAGE)): f.read_text() for f in sorted(PACKAGE.rglob("*.py"))}
    tools = {str(f.relative_to(PACKAGE.parent)): f.read_text()
             for f in sorted(DEVTOOLS.rglob("*.py"))}
    return own | tools


def defining(pattern: str) -> list[str]:
    """The modules whose source matches `pattern` (a regular expression, multiline)."""
    return [name for name, text in sources().items() if re.search(pattern, text, re.MULTILINE)]


@pytest.mark.parametrize("name, owner", [
    ("expected_tokens_per_round", "engine/theory.py"), ("ideal_speedup", "engine/theory.py"),
    ("break_even_alpha", "engine/theory.py"), ("best_k", "engine/theory.py"),
    ("measured_speedup", "engine/theory.py"), ("median_seconds", "engine/costs.py"),
    ("verify_costs", "engine/costs.py"), ("draft_step_cost", "engine/costs.py"),
    ("time_rounds", "engine/costs.py"), ("steady_costs", "engine/costs.py"),
    ("size_label", "models/device/estimate.py"), ("params_label", "models/device/estimate.py"),
    ("file_type_name", "models/device/estimate.py"),
    ("visible", "control_chars.py"), ("json_text", "control_chars.py"),
])
def test_each_formula_and_timer_is_defined_once_by_its_owner(name, owner):
    assert defining(rf"^def {name}\(") == [owner]


def test_no_module_divides_one_rate_by_another_outside_the_theory():
    """A measured speedup is `theory.measured_speedup` (the race, bench tables and sweep,
    bench profile and the live gauge), never a division of its own."""
    division = r"tokens_per_s[\"'\]]*\s*/\s*[a-z(]|\brate\w*(\([^)]*\))?\s*/\s*\w"
    assert defining(division) == ["engine/theory.py"]


def test_step_costs_have_one_class_and_no_second_timer():
    assert defining(r"^class \w*Cost\w*\b") == ["engine/adaptive.py", "engine/costs.py"]
    assert defining(r"^class CostModel\b") == ["engine/adaptive.py"]  # learns live, holds a Costs
    assert defining(r"^class (CostPrior|StepCosts)\b|^def median_time\(") == []


def test_the_k_bounds_are_literals_only_in_the_engines_params():
    assert defining(r"^K_MAX\s*=") == ["engine/params.py"]
    assert defining(r"k_max(: int)?\s*=\s*\d") == []
    from specchat.models.config.pairs import BOUNDS
    from specchat.tui.commands import K_CHOICES

    assert BOUNDS["k"].high == K_MAX and list(K_CHOICES) == list(range(K_MAX + 1))


def test_no_module_writes_a_verify_width_or_a_k_limit_as_a_number():
    """Widths come from engine.costs.WIDTHS (every fixed k's k + 1) or from a k bound, and a
    k option's upper end is K_MAX: never `range(1, 17)`, `IntRange(max=15)`, or a drafter
    asked for a literal number of tokens."""
    assert defining(r"\brange\(1,\s*\d+\s*\)") == []
    assert defining(r"IntRange\([^)]*max\s*=\s*\d") == []
    assert defining(r"[\"']--?k[\"'][^\n]*IntRange\(\s*\d+\s*,\s*\d") == []
    assert defining(r"\.propose\([^)]*,\s*\d+\s*,") == []


def test_the_gpu_scale_command_bounds_k_by_the_engines_k_max():
    from click.testing import CliRunner

    from devtools.cli import main

    refused = CliRunner().invoke(main, ["scale", "--out", "x.jsonl", "--tiny",
                                        "--k", str(K_MAX + 1)])
    assert refused.exit_code == 2 and f"1<=x<={K_MAX}" in refused.output


def test_bench_statistics_and_costs_come_from_their_owners():
    """α, the acceptance rate and τ are the engine's SpecStats' (α from acceptance events per
    tested position, never accepted over drafted); c is `Costs.c`, v(n) `Costs.v`; the GPU
    scale records take them from there, and no bench or command module divides accepted by
    drafted, tokens by rounds, or one step time by another."""
    owned = r"accepted\w*\)?\s*/\s*\(?[\w.]*drafted|tokens\w*\s*/\s*[\w.]*rounds\b|step_(ms|s)\W*\s*/\s*[A-Za-z_]"
    assert [m for m in defining(owned)
            if m.startswith(("bench/", "commands/", "chat/", "devtools/"))] == []
    assert defining(r"^def synchronize\(") == ["engine/costs.py"]


def test_adaptive_k_and_the_theory_share_the_one_maximum_of_k():
    from specchat.chat.baseline_timing import VERIFY_WIDTHS
    from specchat.engine.adaptive import AdaptiveK, settings_for
    from specchat.engine.costs import PRIOR_K_MAX
    from specchat.engine.theory import best_k, cheapest_break_even

    assert AdaptiveK().k_max == K_MAX == AUTO_K_MAX
    assert settings_for("auto", SamplingParams()).k_policy.k_max == K_MAX
    assert inspect.signature(best_k).parameters["k_max"].default == K_MAX
    assert inspect.signature(cheapest_break_even).parameters["k_max"].default == K_MAX
    assert max(VERIFY_WIDTHS) == PRIOR_K_MAX + 1 <= K_MAX + 1  # fewer timed: the rest extended


def test_sampling_settings_are_one_frozen_dataclass_everywhere():
    import dataclasses

    from specchat.chat.baseline import Baseline
    from specchat.models.config.pairs import PairConfig
    from specchat.models.torch_backend.baselines import BaselineSettings

    with pytest.raises(dataclasses.FrozenInstanceError):
        SamplingParams().temperature = 1.0  # type: ignore[misc]
    for holder in (PairConfig, BaselineSettings, Baseline):
        assert typing.get_type_hints(holder)["sampling"] is SamplingParams, holder
    assert defining(r"^class \w*Sampling\w*\b") == ["engine/params.py"]
    assert defining(r"^SamplingKey\b") == []


def test_the_token_kinds_are_one_tuple_shared_by_chat_history_and_tui():
    from specchat.chat.events import TokenSpan
    from specchat.engine import decoder
    from specchat.history import export
    from specchat.tui import chat_screen, transcript

    for module in (export, chat_screen, transcript):
        assert module.TOKEN_KINDS is TOKEN_KINDS, module.__name__
    assert set(typing.get_args(decoder.TokenKind)) <= set(TOKEN_KINDS)  # the target's own kinds
    assert set(typing.get_args(typing.get_type_hints(TokenSpan)["kind"])) == set(TOKEN_KINDS)
    assert set(transcript.KIND_LABELS) == set(TOKEN_KINDS) | {"pending"}
    five = r"""\(\s*["']accepted["'],\s*["']rejected["'],\s*["']resampled["']"""
    assert defining(five) == ["token_kinds.py"]


def test_the_html_export_and_the_legend_list_the_kinds_in_order():
    from specchat.history.export import to_html
    from specchat.history.store import SavedConversation

    page = to_html(SavedConversation(1, "t", "pair", None, 0.0, 0.0), {})
    shown = re.findall(r'<span class="(\w+)">■', page)
    assert tuple(shown) == TOKEN_KINDS


def test_the_owners_load_without_torch():
    code = ("import sys, specchat.engine.params, specchat.engine.theory, specchat.engine.costs, "
            "specchat.engine.adaptive, specchat.chat.baseline, specchat.token_kinds; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_the_float32_greedy_threshold_is_torchs_smallest_normal():
    import torch

    from specchat.engine.params import MIN_TEMPERATURE

    assert MIN_TEMPERATURE == torch.finfo(torch.float32).tiny


TESTS = Path(__file__).resolve().parent


def test_one_least_squares_fit_serves_every_cost_line():
    """Verify widths (engine/costs.py, engine/adaptive.py) and context lengths
    (chat/baseline.py) are fitted by engine/costs.least_squares, not by a copy."""
    assert defining(r"\(x - mean_x\) \*\* 2") == ["engine/costs.py"]
    assert defining(r"^def least_squares\(") == ["engine/costs.py"]
    from specchat.engine.costs import least_squares

    assert least_squares([(1, 2.0), (3, 4.0)]) == pytest.approx((1.0, 1.0))
    assert least_squares([(2, 1.0), (2, 3.0)]) == (2.0, 0.0)  # one x: flat through the mean


def test_per_position_acceptance_has_one_definition():
    assert defining(r"def per_position_\w+") == ["engine/stats.py"]


def test_gguf_tensor_names_and_rope_order_have_one_owner():
    """HF→GGUF tensor names and the Q/K rope row order are models/gguf/export.py's; the tests'
    tiny GGUF writers (tests/tiny_gguf.py, tests/gguf_tiny.py) import them."""
    texts = sources() | {f"tests/{f.name}": f.read_text() for f in sorted(TESTS.glob("*.py"))
                         if f.name != "test_owners.py"}
    permuting = [name for name, text in texts.items() if re.search(r"swapaxes\(1,\s*2\)", text)]
    hf = r"[\"'](self_attn|mlp|input_layernorm|post_attention)[\w.]*[\"']"
    gguf = r"[\"'](attn|ffn)_\w+[\"']"
    naming = [name for name, text in texts.items()
              if re.search(rf"{hf}\s*:\s*{gguf}|{gguf}\s*:\s*{hf}", text)]
    assert permuting == ["models/gguf/export.py"] and naming == []


def test_config_resolution_is_one_function_every_command_calls():
    """`--config` on a command wins over the group's: commands/options.config_from says so
    once, and run, chat, serve, bench and pairs call it rather than repeating it."""
    assert defining(r"ctx\.obj or \{\}\)\.get\([\"']config[\"']\)") == ["commands/options.py"]
    own = [m for m in defining(r"[\"']--config[\"'],\s*[\"']config_file[\"']")
           if m != "devtools/gpu/commands.py"]  # the GPU campaign's: an existing file, its own
    assert own == ["commands/options.py"]
    callers = defining(r"\bconfig_from\(ctx, config_file\)")
    assert {"cli.py", "commands/run.py", "commands/chat.py", "commands/serve.py",
            "commands/bench.py"} <= set(callers)


def test_no_module_but_the_owner_writes_json_that_leaves_c1_controls_raw():
    """Model text in JSON goes through control_chars.json_text: `json.dumps(ensure_ascii=False)`
    leaves U+0080..U+009F raw, which a terminal may obey (issue 40)."""
    model_text = ("commands/run.py", "commands/history.py", "history/export.py")
    assert [name for name in model_text if "ensure_ascii=False" in sources()[name]] == []
