"""The headless CLI through click's CliRunner: run (plain and --jsonl), pairs, locate,
and every bad input as a one-line error with exit status 2 and no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import assert_user_error
from click.testing import CliRunner

from specchat.cli import main


def invoke(*args, input: str | None = None):
    return CliRunner().invoke(main, list(args), input=input)


def test_run_prints_plain_text_when_stdout_is_not_a_terminal(tiny_config):
    result = invoke("--config", str(tiny_config), "run", "--max-new-tokens", "12", "hello")
    assert result.exit_code == 0, result.output
    assert "\x1b[" not in result.stdout
    assert "draft acceptance rate" in result.stderr and "tokens/s" in result.stderr


def test_run_jsonl_prints_one_object_per_round_then_done(tiny_config):
    result = invoke("run", "--config", str(tiny_config), "--jsonl", "--max-new-tokens", "16",
                    "The quick brown fox")
    assert result.exit_code == 0, result.output
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    rounds, done = objects[:-1], objects[-1]
    assert rounds and all(o["type"] == "round" for o in rounds)
    assert set(rounds[0]) == {"type", "accepted", "accepted_text", "rejected", "rejected_text",
                              "token", "token_text", "token_kind", "draft_ms", "verify_ms"}
    assert done["type"] == "done"
    assert set(done["stats"]) == {"tokens", "tokens_per_s", "ttft_s", "rounds", "drafted",
                                  "accepted", "acceptance_rate", "mean_acceptance_length",
                                  "per_position_acceptance", "histogram", "alpha",
                                  "prompt_tokens", "kept_tokens", "decode_s", "p50_token_ms",
                                  "p99_token_ms",
                                  "round_ms"}
    assert done["stats"]["round_ms"] == pytest.approx(
        [o["draft_ms"] + o["verify_ms"] for o in rounds], abs=0.01)
    assert isinstance(done["seed"], int)
    text = "".join(o["accepted_text"] + o["token_text"] for o in rounds)
    # an answer cut inside a multi-byte character ends with its bytes as U+FFFD
    assert done["text"].startswith(text) and set(done["text"][len(text):]) <= {"\ufffd"}
    assert done["stats"]["rounds"] == len(rounds)


def test_run_no_spec_decodes_target_only(tiny_config):
    result = invoke("run", "--config", str(tiny_config), "--no-spec", "--jsonl",
                    "--max-new-tokens", "8", "hello")
    rounds = [json.loads(line) for line in result.stdout.splitlines()][:-1]
    assert {o["token_kind"] for o in rounds} == {"target"}


def test_run_reads_the_prompt_from_stdin(tiny_config):
    result = invoke("run", "--config", str(tiny_config), "--max-new-tokens", "4", "-",
                    input="hello from stdin")
    assert result.exit_code == 0, result.output


def test_pairs_lists_every_pair_and_its_availability(tiny_config):
    result = invoke("pairs", "--config", str(tiny_config))
    assert result.exit_code == 0, result.output
    for name in ("tiny", "tiny-self", "tiny-ngram", "tiny-plain", "smollm2-135m"):
        assert f" {name} " in result.output
    assert "available offline" in result.output


def test_locate_prints_the_configured_places(tmp_path):
    result = invoke("locate", "config")
    assert result.exit_code == 0 and result.output.strip() == str(tmp_path / "config")
    assert invoke("locate", "data").output.strip() == str(tmp_path / "data")


def test_version_and_short_help():
    assert invoke("--version").output.startswith("specchat, version")
    assert "Usage" in invoke("-h").output


# --- bad input -------------------------------------------------------------------------


def test_an_unknown_flag_is_a_usage_error_naming_it():
    result = invoke("run", "--no-such-flag", "hi")
    assert result.exit_code == 2 and "No such option '--no-such-flag'" in result.output
    assert "Traceback" not in result.output


def write(tmp_path: Path, text: str) -> str:
    file = tmp_path / "bad.toml"
    file.write_text(text)
    return str(file)


def test_malformed_toml_names_the_file(tmp_path):
    assert_user_error(invoke("run", "--config", write(tmp_path, "[pairs.x\n"), "hi"),
                      "bad.toml", "not valid TOML")


def test_unknown_key_names_the_key(tmp_path):
    config = write(tmp_path, '[pairs.x]\ntarget = "a"\ntemprature = 0.5\n')
    assert_user_error(invoke("pairs", "--config", config), "temprature", "[pairs.x]")


def test_unknown_pair_lists_the_known_ones(tiny_config):
    assert_user_error(invoke("run", "--config", str(tiny_config), "--pair", "nope", "hi"),
                      "unknown pair 'nope'", "tiny-ngram")


def test_missing_model_folder(tmp_path):
    config = write(tmp_path, f'[pairs.x]\ntarget = "{tmp_path}/absent"\n')
    assert_user_error(invoke("run", "--config", config, "--pair", "x", "hi"), "absent", "does not exist")


def test_missing_gguf_file(tmp_path):
    config = write(tmp_path, f'[pairs.x]\ntarget = "{tmp_path}/model.gguf"\n')
    assert_user_error(invoke("run", "--config", config, "--pair", "x", "hi"), "model.gguf",
                      "does not exist")


def test_uncached_hub_model(tmp_path):
    config = write(tmp_path, '[pairs.x]\ntarget = "someone/not-downloaded-model"\n')
    assert_user_error(invoke("run", "--config", config, "--pair", "x", "hi"),
                      "someone/not-downloaded-model", "local Hugging Face cache")


def test_missing_config_file(tmp_path):
    assert_user_error(invoke("run", "--config", str(tmp_path / "nope.toml"), "hi"), "nope.toml")


def test_a_draft_with_another_vocabulary_answers_and_says_whose_tokens_it_counts(tmp_path,
                                                                               tiny_config):
    from tiny import build_tokenizer, save_tiny

    other = save_tiny(tmp_path / "other", build_tokenizer(vocab_size=290), 1, 32, seed=4)
    target = tiny_config.parent / "target"
    config = write(tmp_path, f'[pairs.x]\ntarget = "{target}"\ndraft = "{other}"\ndtype = "float32"\n')
    result = invoke("run", "--config", config, "--pair", "x", "--max-new-tokens", "8", "hi")
    assert result.exit_code == 0, result.output
    assert "draft tokenizer:" in result.stderr and "target tokens" in result.stderr


@pytest.mark.parametrize("bits", ["4bit", "8bit"])
def test_quantization_without_cuda(tmp_path, tiny_config, bits):
    target = tiny_config.parent / "target"
    config = write(tmp_path, f'[pairs.x]\ntarget = "{target}"\nquantization = "{bits}"\n')
    assert_user_error(invoke("run", "--config", config, "--pair", "x", "hi"), bits, "CUDA")


def test_empty_prompt(tiny_config):
    assert_user_error(invoke("run", "--config", str(tiny_config), "   "), "prompt is empty")


@pytest.mark.parametrize("args, fragment", [
    (["--temperature", "-0.5"], "'--temperature': -0.5 is out of range (allowed: 0 or more; 0 is greedy)"),
    (["--top-p", "0"], "'--top-p': 0 is out of range (allowed: above 0, up to 1)"),
    (["--top-p", "1.5"], "'--top-p': 1.5 is out of range (allowed: above 0, up to 1)"),
])
def test_out_of_range_decoding_values(tiny_config, args, fragment):
    result = invoke("run", "--config", str(tiny_config), *args, "hi")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"Invalid value for {fragment}" in result.output


@pytest.mark.parametrize("line, fragment", [
    ('k = -2', "'k': -2 is out of range"),
    ('top_p = 2.0', "'top_p': 2 is out of range (allowed: above 0, up to 1)"),
    ('dtype = "float8"', "'dtype' must be one of"),
    ('device = "tpu"', "'device' must be"),
    ('device = "cuda:²"', "'device' must be"),  # a digit to str.isdigit, none to int()
    ('device = "cuda:٣"', "'device' must be"),  # a number to int(), none to torch.device
    ('quantization = "3bit"', "'quantization' must be one of"),
    ('k = "four"', "'k': 'four' is not a whole number"),
])
def test_bad_values_in_models_toml_name_the_key(tmp_path, line, fragment):
    config = write(tmp_path, f'[pairs.x]\ntarget = "a"\n{line}\n')
    assert_user_error(invoke("pairs", "--config", config), fragment, "[pairs.x]")


def model_folder_with(tmp_path: Path, tiny_config: Path, damage) -> tuple[str, Path]:
    """A copy of the tiny target folder whose model.safetensors `damage` spoiled; its config."""
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(tiny_config.parent / "target", folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(damage(weights.read_bytes()))
    return write(tmp_path, f'[pairs.x]\ntarget = "{folder}"\nk = 0\n'), weights


def test_a_truncated_safetensors_file_is_named_with_both_sizes(tmp_path, tiny_config):
    whole = (tiny_config.parent / "target" / "model.safetensors").stat().st_size
    config, weights = model_folder_with(tmp_path, tiny_config, lambda data: data[: len(data) // 2])
    assert_user_error(invoke("run", "--config", config, "--pair", "x", "hi"), str(weights),
                      "truncated or corrupt", f"need {whole:,} bytes", f"has {whole // 2:,}")


def test_a_safetensors_header_with_a_garbage_length_is_named(tmp_path, tiny_config):
    import struct

    config, weights = model_folder_with(tmp_path, tiny_config,
                                        lambda data: struct.pack("<Q", 2 ** 62) + data[8:])
    assert_user_error(invoke("run", "--config", config, "--pair", "x", "hi"), str(weights),
                      "truncated or corrupt", f"{2 ** 62:,} bytes of metadata")


@pytest.mark.parametrize("args", [["chat"], ["chat", "--demo", "50"], []])
def test_the_chat_with_its_output_piped_stops_with_one_line_instead_of_drawing(args,
                                                                               monkeypatch):
    from textual.app import App

    import specchat.commands.chat as chat_command

    drawn = []
    monkeypatch.setattr(App, "run", lambda app, *a, **k: drawn.append(app))
    monkeypatch.setattr(chat_command, "leave", lambda code, note=None: None)  # no os._exit
    result = invoke(*args)  # pytest's stdout is no terminal, as `specchat chat | tee` has
    assert_user_error(result, "terminal", "specchat run")
    assert drawn == []
