"""True labels for a GGUF model on llama.cpp: the quantization type ("Q4_K_M", not llama.cpp's
"Q4_K - Medium") and the model size ("0.5B", not llama.cpp's size bucket "1B") come from the
file's own metadata (`general.file_type`, `general.size_label`, else its parameter count), in
`run`'s stats and in the chat's panel. Tiny float32 GGUF files whose metadata claims a type
and a size (tests/gguf_tiny.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make test installs it)")

from click.testing import CliRunner  # noqa: E402

from specchat.cli import main  # noqa: E402
from specchat.models.device.estimate import file_type_name, params_label  # noqa: E402
from specchat.models.llamacpp.model import LlamaCppModel  # noqa: E402

Q4_K_M = 15


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """A tiny GGUF whose metadata says Q4_K_M and 0.5B, and one that names no size."""
    from gguf_tiny import write_tiny_gguf

    root = tmp_path_factory.mktemp("labels")
    claimed = write_tiny_gguf(root / "claimed", file_type=Q4_K_M, size_label="0.5B")
    unnamed = write_tiny_gguf(root / "unnamed")
    config = root / "models.toml"
    config.write_text(f'[pairs.labelled]\ntarget = "{claimed}"\nk = 0\nthreads = 1\n')
    return {"claimed": claimed, "unnamed": unnamed, "config": config}


def test_the_quantization_type_and_size_are_the_files_own(labelled):
    model = LlamaCppModel(labelled["claimed"], threads=1)
    assert model.weights == "Q4_K_M" and model.size_label == "0.5B"
    assert model.description == "llama 0.5B Q4_K_M"


def test_without_a_size_label_the_size_is_the_parameter_count(labelled):
    model = LlamaCppModel(labelled["unnamed"], threads=1)
    count = int(model._lib.llama_model_n_params(model._model))
    label = model.size_label
    assert label.endswith("K") and abs(float(label[:-1]) * 1e3 / count - 1) < 0.01
    assert model.weights == "F32"


def test_parameter_counts_and_file_types_are_named_as_gguf_names_them():
    assert [params_label(n) for n in (134_515_008, 494_032_768, 1_543_714_304, 7_615_616_512)] == \
        ["135M", "494M", "1.54B", "7.62B"]
    assert [file_type_name(v) for v in ("15", "3", "0", "1", "32", "17")] == \
        ["Q4_K_M", "Q4_1", "F32", "F16", "BF16", "Q5_K_M"]
    assert file_type_name(None) is None and file_type_name("1024") is None  # "guessed"


def test_run_shows_the_files_quantization_type_and_size(labelled):
    result = CliRunner().invoke(main, ["run", "--config", str(labelled["config"]), "--pair",
                                       "labelled", "--max-new-tokens", "4", "hi"])
    assert result.exit_code == 0, result.output
    assert "cpu / Q4_K_M" in result.stderr
    assert "llama.cpp (llama 0.5B Q4_K_M, 1 thread" in result.stderr  # notes may follow (AMX)
    assert "Medium" not in result.stderr


async def test_the_panel_shows_the_files_quantization_type_and_size(labelled):
    from tui_support import wait_for

    from specchat.commands.chat import pair_service
    from specchat.models.config.pairs import load_catalog
    from specchat.tui.app import create_app

    catalog = load_catalog(labelled["config"])
    app = create_app(lambda name: pair_service(catalog.get(name), None, 8, None),
                     [("labelled", "")], "labelled")
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(pilot, lambda: app.gauges.info is not None, 60)
        shown = str(app.gauges.query_one("#g-pair").render())
        assert "Q4_K_M" in shown and "llama 0.5B Q4_K_M" in shown


def test_pairs_check_shows_the_size_the_file_labels_as_run_does(labelled):
    """`pairs --check` sizes a GGUF by its own label ("1.5B"), not by its tensors' count (a
    Qwen2.5 1.5B file holds its tied output matrix twice: 1777.1M)."""
    result = CliRunner().invoke(main, ["pairs", "--config", str(labelled["config"]),
                                       "--check", "labelled"])
    assert result.exit_code == 0, result.output
    assert f"target {labelled['claimed']}: 0.5B parameters, weights" in result.output
    unnamed = labelled["config"].parent / "unnamed.toml"
    unnamed.write_text(f'[pairs.unnamed]\ntarget = "{labelled["unnamed"]}"\nk = 0\n')
    result = CliRunner().invoke(main, ["pairs", "--config", str(unnamed), "--check", "unnamed"])
    label = LlamaCppModel(labelled["unnamed"], threads=1).size_label  # what run shows
    assert f"target {labelled['unnamed']}: {label} parameters, weights" in result.output
