"""Big targets on CPU (issue 14): placement over fake device inventories, sizes read
without loading, one-line errors for quantization without CUDA, a draft larger than
its target and a model that does not fit, accelerate spreading a tiny model under a
forced memory limit, memory figures on the loaded pair, and an out-of-memory round
that keeps the answer so far and lets the chat go on."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from specchat.errors import ConfigError, OutOfMemory, PairError
from specchat.models.device.placement import (GiB, Inventory, layer_summary, parse_max_memory,
                                       plan_placement)


def test_a_model_that_fits_one_gpu_stays_whole_on_it():
    place = plan_placement(10 * GiB, "auto", Inventory({0: 40 * GiB, 1: 40 * GiB}, 64 * GiB))
    assert place.device == "cuda" and place.device_map is None and place.kwargs() == {}


def test_a_model_larger_than_one_gpu_is_spread_over_all_of_them_then_cpu():
    place = plan_placement(140 * GiB, "auto", Inventory({0: 80 * GiB, 1: 80 * GiB}, 256 * GiB))
    assert place.device == "cuda:0" and place.device_map == "auto"
    assert set(place.max_memory) == {0, 1, "cpu"}
    assert place.max_memory[0] < 80 * GiB  # a reserve stays free on each GPU


def test_the_pairs_max_memory_forces_offloading_even_where_it_would_fit():
    limits = parse_max_memory({"0": "2GiB", "cpu": "30GB"})
    assert limits == {0: 2 * GiB, "cpu": 30 * 10**9}
    place = plan_placement(10 * GiB, "auto", Inventory({0: 80 * GiB}, 64 * GiB), limits)
    assert place.device_map == "auto" and place.max_memory == limits


def test_a_model_that_does_not_fit_even_offloaded_says_what_it_needs_and_has():
    with pytest.raises(OutOfMemory, match=r"needs about 168\.00 GiB .* there is 71\.00 GiB"):
        plan_placement(140 * GiB, "auto", Inventory({0: 24 * GiB}, 64 * GiB), name="target big")
    with pytest.raises(OutOfMemory, match="RAM"):
        plan_placement(40 * GiB, "auto", Inventory({}, 16 * GiB))


def test_without_a_gpu_auto_means_the_cpu():
    assert plan_placement(GiB, "auto", Inventory({}, 64 * GiB)).device == "cpu"


def test_bad_max_memory_values_are_config_errors():
    with pytest.raises(ConfigError, match="'lots'"):
        parse_max_memory({"0": "lots"})
    with pytest.raises(ConfigError, match="unknown device 'gpu0'"):
        parse_max_memory({"gpu0": "1GiB"})


def test_layer_summary_counts_layers_per_device():
    device_map = {"model.embed_tokens": 0, "model.layers.0": 0, "model.layers.1": 0,
                  "model.layers.2": "cpu", "model.norm": "cpu", "lm_head": "cpu"}
    assert layer_summary(device_map, "cuda") == "cuda:0 2 layers, cpu 1 layers"
    assert layer_summary(None, "cpu") == "all on cpu"


def test_sizes_from_safetensors_headers_match_the_loaded_model(load_tiny, tiny_config):
    from specchat.models.device.estimate import model_size, size_from_config

    pair = load_tiny("tiny")
    folder = pair.config.target
    size = model_size(folder)
    assert size.source == "safetensors headers"
    assert size.parameters == sum(p.numel() for p in pair.target.model.parameters())
    assert size.weight_bytes(4) == pair.target.model.num_parameters() * 4
    assert size.weight_bytes(2, "4bit") < size.weight_bytes(2, "8bit") < size.weight_bytes(2)
    assert size_from_config(pair.target.config.to_dict()).parameters == size.parameters


def tiny_variant(load_tiny, name="tiny", **changes):
    return dataclasses.replace(load_tiny(name).config, **changes)


@pytest.mark.parametrize("key", ["quantization", "draft_quantization"])
def test_quantization_without_cuda_is_a_one_line_pair_error(load_tiny, key):
    from specchat.models.loader import load_pair

    with pytest.raises(PairError, match=f'{key} = "4bit" needs a CUDA GPU'):
        load_pair(tiny_variant(load_tiny, **{key: "4bit", "device": "cpu"}))


def test_a_draft_larger_than_its_target_is_refused_before_loading(load_tiny):
    from specchat.models.loader import load_pair

    config = load_tiny("tiny").config
    swapped = dataclasses.replace(config, target=config.draft, draft=config.target)
    with pytest.raises(PairError, match="is larger than its target"):
        load_pair(swapped)


def test_accelerate_spreads_a_tiny_target_when_max_memory_forces_it(load_tiny, monkeypatch):
    """No GPU here: the limits put the layers on cpu and disk, through accelerate's device_map."""
    pytest.importorskip("accelerate")
    from specchat.chat.session import ChatSession
    from specchat.models.loader import load_pair

    limits = {"cpu": 250_000, "disk": 10**9}
    reference = load_tiny("tiny-ngram")
    monkeypatch.setattr("specchat.models.device.memory.current_inventory", lambda: Inventory({0: 0}, 0))
    pair = load_pair(tiny_variant(load_tiny, "tiny-ngram", max_memory=limits))
    devices = set(pair.target.model.hf_device_map.values())
    assert {"cpu", "disk"} <= devices, pair.target.model.hf_device_map
    assert "cpu" in pair.placement and "disk" in pair.placement
    prompt = torch.arange(4, 20)
    for model in (pair.target, reference.target):
        model.reset()
    torch.testing.assert_close(pair.target.forward(prompt), reference.target.forward(prompt),
                               atol=1e-4, rtol=1e-4)
    answer = list(ChatSession(pair).answer("hello", max_new_tokens=6))[-1]
    assert answer.stats.tokens >= 1


def test_memory_report_counts_weights_and_the_kv_cache(load_tiny):
    pair = load_tiny("tiny")
    memory = pair.memory()
    assert memory.target_weights == pair.target.parameter_bytes > memory.draft_weights > 0
    assert memory.peak is None  # no CUDA here
    labels = [label for label, _ in memory.rows()]
    assert labels[:2] == ["memory: target weights", "memory: draft weights"]


class RaisesOnThirdForward:
    """Wraps a model; its third forward raises CUDA's out-of-memory error."""

    def __init__(self, model):
        self.inner, self.calls = model, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def forward(self, ids, keep=1):
        self.calls += 1
        if self.calls == 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return self.inner.forward(ids, keep)


def test_out_of_memory_mid_answer_keeps_the_text_and_the_chat_goes_on(load_tiny):
    from specchat.chat.session import ChatSession

    real = load_tiny("tiny-plain")
    pair = dataclasses.replace(real, target=RaisesOnThirdForward(real.target))
    session = ChatSession(pair)
    done = list(session.answer("hello there", max_new_tokens=12))[-1]
    assert done.stop_reason == "failed" and "out of GPU memory" in done.error
    assert done.stats.tokens == 2 and done.text
    assert [t.role for t in session.conversation.turns] == ["user", "assistant"]
    assert session.conversation.turns[-1].text == done.text
    after = list(session.answer("and again", max_new_tokens=4))[-1]
    assert after.stop_reason != "failed" and after.stats.tokens >= 1


def test_run_reports_memory_in_its_stats_block_and_done_object(tiny_config):
    import json

    from click.testing import CliRunner

    from specchat.cli import main

    plain = CliRunner().invoke(main, ["--config", str(tiny_config), "run", "--max-new-tokens", "4",
                                      "hello"])
    assert plain.exit_code == 0, plain.output
    assert "memory: target weights" in plain.stderr and "memory: KV cache" in plain.stderr
    jsonl = CliRunner().invoke(main, ["run", "--config", str(tiny_config), "--jsonl",
                                      "--max-new-tokens", "4", "hello"])
    done = json.loads(jsonl.stdout.splitlines()[-1])
    assert done["memory"]["target_weights"] > done["memory"]["draft_weights"] > 0


def test_a_failed_round_in_run_prints_the_answer_then_exits_2(tiny_config, monkeypatch):
    from click.testing import CliRunner

    from specchat.cli import main
    from specchat.models import loader

    real = loader.load_pair

    def failing(*args, **kwargs):
        pair = real(*args, **kwargs)
        return dataclasses.replace(pair, target=RaisesOnThirdForward(pair.target))

    monkeypatch.setattr(loader, "load_pair", failing)
    result = CliRunner().invoke(main, ["--config", str(tiny_config), "run", "--pair", "tiny-plain",
                                       "--max-new-tokens", "8", "hello"])
    assert result.exit_code == 2
    assert result.stdout.strip()  # the answer so far
    assert "error: the answer ended early: out of GPU memory" in result.stderr
    assert "Traceback" not in result.output


def test_max_memory_and_draft_quantization_are_read_from_models_toml(tmp_path):
    from specchat.models.config.pairs import load_catalog

    file = tmp_path / "models.toml"
    file.write_text('[pairs.big]\ntarget = "t"\ndraft = "d"\ndraft_quantization = "8bit"\n'
                    'max_memory = { "0" = "20GiB", "cpu" = "64GiB" }\n')
    pair = load_catalog(file).get("big")
    assert pair.draft_quantization == "8bit"
    assert pair.max_memory == {0: 20 * GiB, "cpu": 64 * GiB}
    file.write_text('[pairs.big]\ntarget = "t"\ndraft_quantization = "2bit"\n')
    with pytest.raises(ConfigError, match="'draft_quantization' must be one of"):
        load_catalog(file)
