"""Numbers have bounds, one owner each (issue 24): k (0 to K_MAX, or "auto"), top_k,
ngram_n, max_new_tokens (engine/params.py) and threads (the config module's; capped to
the usable cores when a model loads). Every message names the key or flag and the
allowed range, the same in models.toml, on the command line and on the chat's keys;
a value out of range never reaches the engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from specchat.cli import main
from specchat.engine.params import K_MAX

K_RANGE = f'(allowed: 0 to {K_MAX}, or "auto")'


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


def one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specchat: error:"), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("line, message", [
    ("k = 1e9", f"'k': 1000000000.0 is not a whole number {K_RANGE}"),
    ("k = 1000000000", f"'k': 1000000000 is out of range {K_RANGE}"),
    (f"k = {K_MAX + 1}", f"'k': {K_MAX + 1} is out of range {K_RANGE}"),
    ("k = -2", f"'k': -2 is out of range {K_RANGE}"),
    ('k = "four"', f"'k': 'four' is not a whole number {K_RANGE}"),
    ("top_k = 2000000", "'top_k': 2000000 is out of range (allowed: 0 to 1000000)"),
    ("top_k = 1.5", "'top_k': 1.5 is not a whole number (allowed: 0 to 1000000)"),
    ("ngram_n = 0", "'ngram_n': 0 is out of range (allowed: 1 to 16)"),
    ("ngram_n = 40", "'ngram_n': 40 is out of range (allowed: 1 to 16)"),
    ("threads = -1", "'threads': -1 is out of range (allowed: 0 or more)"),
    ("threads = 2.5", "'threads': 2.5 is not a whole number (allowed: 0 or more)"),
])
def test_models_toml_names_the_key_and_the_allowed_range(tmp_path, line, message):
    config = write(tmp_path, f'[pairs.x]\ntarget = "a"\n{line}\n')
    error = one_line_error(invoke("pairs", "--config", config))
    assert f"{config}: [pairs.x]: {message}" in error


def test_the_largest_k_and_more_threads_than_cores_are_accepted(tmp_path):
    config = write(tmp_path, f'[pairs.x]\ntarget = "a"\nk = {K_MAX}\nthreads = 10000\n')
    result = invoke("pairs", "--config", config)
    assert result.exit_code == 0, result.output  # threads are capped when the model loads


@pytest.mark.parametrize("args, flag, message", [
    (["-k", "1e9"], "'-k'", f"'1e9' is not a whole number {K_RANGE}"),
    (["-k", "1000000000"], "'-k'", f"1000000000 is out of range {K_RANGE}"),
    (["-k", "fast"], "'-k'", f"'fast' is not a whole number {K_RANGE}"),
    (["--top-k", "1e9"], "'--top-k'", "'1e9' is not a whole number (allowed: 0 to 1000000)"),
    (["--top-k", "-1"], "'--top-k'", "-1 is out of range (allowed: 0 to 1000000)"),
    (["--max-new-tokens", "0"], "'--max-new-tokens'", "0 is out of range (allowed: 1 to 131072)"),
    (["--max-new-tokens", "1e9"], "'--max-new-tokens'",
     "'1e9' is not a whole number (allowed: 1 to 131072)"),
])
def test_command_line_flags_name_the_flag_and_the_allowed_range(tiny_config, args, flag, message):
    result = invoke("run", "--config", tiny_config, *args, "hi")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"Invalid value for {flag}: {message}" in result.output


TEMPERATURE_RANGE = "(allowed: 0 or more; 0 is greedy)"
TOP_P_RANGE = "(allowed: above 0, up to 1)"


@pytest.mark.parametrize("line, message", [
    ("temperature = nan", f"'temperature': nan is not a finite number {TEMPERATURE_RANGE}"),
    ("temperature = inf", f"'temperature': inf is not a finite number {TEMPERATURE_RANGE}"),
    ("temperature = -0.5", f"'temperature': -0.5 is out of range {TEMPERATURE_RANGE}"),
    ("top_p = nan", f"'top_p': nan is not a finite number {TOP_P_RANGE}"),
    ("top_p = 0", f"'top_p': 0 is out of range {TOP_P_RANGE}"),
])
def test_models_toml_refuses_nan_and_inf_sampling_by_the_key_as_written(tmp_path, line, message):
    config = write(tmp_path, f'[pairs.x]\ntarget = "a"\n{line}\n')
    error = one_line_error(invoke("pairs", "--config", config))
    assert f"{config}: [pairs.x]: {message}" in error


@pytest.mark.parametrize("args, flag, message", [
    (["--temperature", "nan"], "'--temperature'", f"nan is not a finite number {TEMPERATURE_RANGE}"),
    (["--temperature", "inf"], "'--temperature'", f"inf is not a finite number {TEMPERATURE_RANGE}"),
    (["--temperature", "-inf"], "'--temperature'", f"-inf is not a finite number {TEMPERATURE_RANGE}"),
    (["--top-p", "nan"], "'--top-p'", f"nan is not a finite number {TOP_P_RANGE}"),
    (["--top-p", "inf"], "'--top-p'", f"inf is not a finite number {TOP_P_RANGE}"),
    (["--temperature", "warm"], "'--temperature'", f"'warm' is not a number {TEMPERATURE_RANGE}"),
])
def test_nan_and_inf_sampling_flags_are_refused_by_the_flag_before_loading(
        tiny_config, monkeypatch, args, flag, message):
    from specchat.models import loader

    monkeypatch.setattr(loader, "load_pair", lambda *a, **k: pytest.fail("the pair was loaded"))
    result = invoke("run", "--config", tiny_config, *args, "hi")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"Invalid value for {flag}: {message}" in result.output


def test_a_nan_temperature_in_models_toml_never_loads_the_pair(tmp_path, tiny_config, monkeypatch):
    from specchat.models import loader

    monkeypatch.setattr(loader, "load_pair", lambda *a, **k: pytest.fail("the pair was loaded"))
    target = tiny_config.parent / "target"
    config = write(tmp_path, f'[pairs.hot]\ntarget = "{target}"\ntemperature = nan\n')
    error = one_line_error(invoke("run", "--config", config, "--pair", "hot", "hi"))
    assert "'temperature': nan is not a finite number" in error


@pytest.mark.parametrize("command", [["chat"], ["bench", "run"]])
def test_chat_and_bench_check_k_and_the_answer_length_alike(command):
    result = invoke(*command, "-k", "1e9")
    assert result.exit_code == 2 and f"'1e9' is not a whole number {K_RANGE}" in result.output
    result = invoke(*command, "--max-new-tokens", "200000")
    assert result.exit_code == 2 and "200000 is out of range (allowed: 1 to 131072)" in result.output


def test_a_bench_sweep_refuses_a_draft_length_beyond_the_maximum(tiny_config):
    error = one_line_error(invoke("bench", "sweep", "--config", tiny_config, "--ks", f"2,{K_MAX + 1}"))
    assert f"--ks: {K_MAX + 1} is out of range (allowed: 1 to {K_MAX})" in error


def test_a_k_out_of_range_never_reaches_the_engine(tmp_path, tiny_config, monkeypatch):
    from specchat.models import loader

    def no_load(*args, **kwargs):
        raise AssertionError("a pair with k out of range was loaded")

    monkeypatch.setattr(loader, "load_pair", no_load)
    target = tiny_config.parent / "target"
    config = write(tmp_path, f'[pairs.big]\ntarget = "{target}"\nk = 1000000000\n')
    error = one_line_error(invoke("run", "--config", config, "--pair", "big", "hi"))
    assert "'k': 1000000000 is out of range" in error
    result = invoke("run", "--config", tiny_config, "-k", "1000000000", "hi")
    assert result.exit_code == 2 and "out of range" in result.output


# --- the chat's keys and palette ---------------------------------------------------------

async def test_the_k_keys_stop_at_the_bounds_and_say_the_range():
    from tui_support import make_app, ready, wait_for

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        service = app.services["fake"]
        await pilot.press(*["f10"] * (K_MAX - service.k + 1))
        message = f"k: {K_MAX + 1} is out of range (allowed: 0 to {K_MAX})"
        await wait_for(pilot, lambda: any(message in n.message for n in app._notifications))
        assert service.k == K_MAX
        await pilot.press(*["f9"] * (K_MAX + 1))
        message = f"k: -1 is out of range (allowed: 0 to {K_MAX})"
        await wait_for(pilot, lambda: any(message in n.message for n in app._notifications))
        assert service.k == 0


async def test_the_palette_offers_every_k_up_to_the_maximum_and_no_more():
    from specchat.tui.commands import palette_entries
    from tui_support import make_app, ready

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        titles = {title for title, _, _ in palette_entries(app) if title.startswith("Set k = ")}
        assert titles == {f"Set k = {k}" for k in range(K_MAX + 1)}
        {title: run for title, _, run in palette_entries(app)}[f"Set k = {K_MAX}"]()
        assert app.services["fake"].k == K_MAX
