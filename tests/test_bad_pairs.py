"""Bad pairs as a user writes them (issue 40, part 4): `specchat pairs` calls a model folder
available only when it holds what loading needs (an empty folder, `/` and a folder without
tokenizer files were "available offline"), and loading says what is missing in one whole
line (transformers' message was cut at "from one of:"); a target that is a number is not
"required"; an answer the model's context ends reads context_full, not max_tokens."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from specchat.cli import main
from specchat.errors import one_line

SAVED_WITH = "point models.toml at a folder saved with save_pretrained"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def folders(tiny_config: Path, root: Path) -> dict[str, tuple[Path, str]]:
    """Model folders that cannot load, each with the line that says why."""
    target = tiny_config.parent / "target"
    empty, no_tokenizer, no_weights = root / "empty", root / "no-tokenizer", root / "no-weights"
    empty.mkdir()
    shutil.copytree(target, no_tokenizer, ignore=shutil.ignore_patterns("tokenizer*"))
    shutil.copytree(target, no_weights, ignore=shutil.ignore_patterns("*.safetensors"))
    return {
        "empty": (empty, f"model folder {empty} has no config.json: {SAVED_WITH}"),
        "root": (Path("/"), f"model folder / has no config.json: {SAVED_WITH}"),
        "no-tokenizer": (no_tokenizer, f"model folder {no_tokenizer} has no tokenizer files "
                         "(tokenizer.json, or vocab.json and merges.txt): save the model's "
                         "tokenizer there too (tokenizer.save_pretrained)"),
        "no-weights": (no_weights, f"model folder {no_weights} has no weights (model.safetensors "
                       f"or pytorch_model.bin, or their index): {SAVED_WITH}"),
    }


@pytest.fixture
def bad_folders(tiny_config, tmp_path) -> tuple[Path, dict[str, tuple[Path, str]]]:
    """A models.toml with a pair per unloadable folder, and a good one: (its path, the folders)."""
    bad = folders(tiny_config, tmp_path)
    pairs = "".join(f'[pairs.{name}]\ntarget = "{folder}"\nk = 0\n\n'
                    for name, (folder, _) in bad.items())
    good = tiny_config.parent / "target"
    config = tmp_path / "models.toml"
    config.write_text(pairs + f'[pairs.good]\ntarget = "{good}"\nk = 0\ndtype = "float32"\n')
    return config, bad


def test_pairs_calls_a_folder_available_only_when_it_holds_what_loading_needs(bad_folders):
    config, bad = bad_folders
    records = {r["name"]: r["models"]["target"]
               for r in json.loads(invoke("pairs", "--config", str(config), "--json").stdout)}
    assert records["good"]["available"] is True
    for name, (_, why) in bad.items():
        assert records[name]["available"] is False and records[name]["where"] == why, name
    lines = invoke("pairs", "--config", str(config)).stdout
    assert f"target /: NOT available ({bad['root'][1]})" in lines


@pytest.mark.parametrize("name", ["empty", "no-tokenizer", "no-weights"])
def test_loading_an_incomplete_folder_is_one_whole_line_saying_what_to_do(bad_folders, name):
    config, bad = bad_folders
    result = invoke("run", "--config", str(config), "--pair", name, "hi")
    assert result.exit_code == 2
    assert result.output.splitlines() == [f"specchat: error: {bad[name][1]}"]


def test_a_library_error_over_several_lines_is_joined_whole_not_cut_at_its_first():
    transformers_said = ValueError(
        "Couldn't instantiate the backend tokenizer from one of: \n(1) a `tokenizers` library "
        "serialization file, \n(2) a slow tokenizer instance to convert or \n(3) an equivalent "
        "slow tokenizer class to instantiate and convert. \nYou need to have sentencepiece or "
        "tiktoken installed to convert a slow tokenizer to a fast one.")
    line = one_line(transformers_said)
    assert "\n" not in line and line.startswith("Couldn't instantiate the backend tokenizer "
                                                "from one of: (1) a `tokenizers` library")
    assert line.endswith("You need to have sentencepiece or tiktoken installed to convert a slow "
                         "tokenizer to a fast one.")
    short = one_line(transformers_said, 80)
    assert short.endswith(" …") and len(short) <= 82


@pytest.mark.parametrize("target, message", [
    ("5", "'target' must be a model reference (a hub id, folder, .gguf file or builtin:NAME, in "
          "quotes), not 5"),
    ('""', "'target' is empty: write a model reference (a hub id, folder, .gguf file or "
           "builtin:NAME, in quotes)"),
    (None, "'target' is required: a hub id, folder, .gguf file or builtin:NAME, in quotes"),
])
def test_a_target_that_is_no_model_reference_says_what_it_is(tmp_path, target, message):
    config = tmp_path / "models.toml"
    config.write_text("[pairs.x]\n" + (f"target = {target}\n" if target else "") + "k = 0\n")
    result = invoke("pairs", "--config", str(config))
    assert result.exit_code == 2
    assert result.output.splitlines() == [f"specchat: error: {config}: [pairs.x]: {message}"]


LONG_PROMPT = "The quick brown fox jumps over the lazy dog. " * 20
"""About 220 tokens of the tiny pair's 512: greedy, it reaches the end of the context before
its end of text."""


def test_an_answer_the_context_ends_reads_context_full_not_max_tokens(tiny_config):
    args = ["run", "--config", str(tiny_config), "--pair", "tiny", "--temperature", "0",
            "--max-new-tokens", "100000"]
    done = json.loads(invoke(*args, "--jsonl", LONG_PROMPT).stdout.splitlines()[-1])
    assert done["stop_reason"] == "context_full"
    assert done["stats"]["prompt_tokens"] + done["stats"]["tokens"] == 512  # the context, full
    stats = invoke(*args, LONG_PROMPT).stderr
    assert "stop reason:                     context_full" in stats


def test_an_answer_that_reaches_the_length_asked_for_still_reads_max_tokens(tiny_config):
    result = invoke("run", "--config", str(tiny_config), "--pair", "tiny", "--temperature", "0",
                    "--max-new-tokens", "5", "--jsonl", LONG_PROMPT)
    done = json.loads(result.stdout.splitlines()[-1])
    assert done["stop_reason"] == "max_tokens"
