"""k = "auto"'s step costs are timed once per pair and processor and remembered: a later
start of the same pair begins from them and times nothing (2.2 s of the default pair's
6.1 s load), the chat's idle re-timing replaces them, and a remembered timing from another
processor, or a damaged file, is never used (chat/remembered_costs.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import time

import pytest

from specchat.chat import baseline_timing, remembered_costs
from specchat.chat.baseline_timing import TIMING_COSTS
from specchat.engine import SamplingParams
from specchat.paths import data_dir


@pytest.fixture
def service_of(tiny_config):
    """service_of() -> a fresh, unloaded `PairService` of the tiny pair at k = "auto"."""
    from specchat.chat.pair_service import PairService
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    config = dataclasses.replace(load_catalog(tiny_config).get("tiny"), k="auto")
    return lambda: PairService("tiny", lambda dtype, progress: load_pair(config, progress=progress))


@pytest.fixture
def timings(monkeypatch) -> list:
    """The costs each timing returned, in order."""
    timed: list = []
    real = baseline_timing.measure_baseline_costs

    def counted(*args, **kwargs):
        timed.append(real(*args, **kwargs))
        return timed[-1]

    monkeypatch.setattr(baseline_timing, "measure_baseline_costs", counted)
    return timed


def load(service) -> list[str]:
    notes: list[str] = []
    service.load(notes.append)
    return notes


def prior(service):
    return service.loaded.settings.k_policy.costs.prior


def test_a_second_start_of_the_pair_begins_from_the_first_ones_timing_and_times_nothing(
        service_of, timings):
    first, second = service_of(), service_of()
    assert TIMING_COSTS in load(first) and len(timings) == 1
    assert TIMING_COSTS not in load(second) and len(timings) == 1
    assert prior(second) == prior(first) == timings[0]
    *_, done = second.answer("hello", True, lambda: False)
    assert done.stats.tokens > 0 and len(timings) == 1


def test_the_chats_idle_re_timing_is_what_the_next_start_begins_from(service_of, timings):
    service = service_of()
    load(service)
    baseline = service.measure_baseline(lambda: False)
    assert baseline is not None and len(timings) == 2 and baseline.costs == timings[1]
    later = service_of()
    load(later)
    assert len(timings) == 2 and prior(later) == timings[1]


def test_a_timing_on_another_processor_is_not_used(service_of, timings, monkeypatch):
    from specchat.models.device import cores

    load(service_of())
    monkeypatch.setattr(cores, "cpu_identity", lambda: "vendor_id Other, model name Other; 2 cores")
    assert TIMING_COSTS in load(service_of()) and len(timings) == 2
    assert len(json.loads((data_dir() / remembered_costs.REMEMBERED).read_text())) == 2


@pytest.mark.parametrize("damage", [
    "not json at all {",
    '{"key": "a dict, not a list"}',
    "[1, 2, 3]",
    "KEY_WITH_COSTS",
])
@pytest.mark.parametrize("costs", [
    {"target_step_s": -1.0, "draft_step_s": 0.001, "verify_s": {"1": 0.01}},
    {"target_step_s": 0.01, "draft_step_s": 0.001, "verify_s": {"2": 0.01}},
    {"target_step_s": 0.01, "draft_step_s": "fast", "verify_s": {"1": 0.01}},
    {"target_step_s": 0.01, "draft_step_s": 0.001, "verify_s": {"1": float("nan")}},
    {"target_step_s": 0.01, "draft_step_s": 0.001, "verify_s": [0.01]},
])
def test_a_damaged_file_is_passed_over_timed_again_and_rewritten(service_of, timings, damage,
                                                                  costs, load_tiny):
    key = remembered_costs.costs_key(load_tiny("tiny"))
    path = data_dir() / remembered_costs.REMEMBERED
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{"key": key, "timed_at": time.time(), "costs": costs}])
                    if damage == "KEY_WITH_COSTS" else damage)
    assert TIMING_COSTS in load(service_of()) and len(timings) == 1
    assert remembered_costs.remembered_costs(load_tiny("tiny")) == timings[0]


def test_a_start_whose_costs_cannot_be_written_still_loads_and_answers(service_of, timings):
    folder = data_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / remembered_costs.REMEMBERED).mkdir()  # a folder where the file would go
    service = service_of()
    assert TIMING_COSTS in load(service)
    *_, done = service.answer("hello", True, lambda: False)
    assert done.stats.tokens > 0
    assert [name for name in os.listdir(folder) if name.endswith(".partial")] == []


def test_a_timing_is_used_for_a_week_and_timed_again_after(service_of, timings, load_tiny):
    load(service_of())
    pair, now = load_tiny("tiny"), time.time()
    week = remembered_costs.FRESH_FOR_S
    assert remembered_costs.remembered_costs(pair, now + week - 60) == timings[0]
    assert remembered_costs.remembered_costs(pair, now + week + 60) is None
    assert remembered_costs.remembered_costs(pair, now - 3600) is None  # a clock set back
    path = data_dir() / remembered_costs.REMEMBERED
    entries = json.loads(path.read_text())
    entries[0]["timed_at"] -= week + 60
    path.write_text(json.dumps(entries))
    assert TIMING_COSTS in load(service_of()) and len(timings) == 2


def test_the_key_tells_the_pairs_engines_apart(load_tiny):
    tiny, ngram = load_tiny("tiny"), load_tiny("tiny-ngram")
    assert remembered_costs.costs_key(tiny) != remembered_costs.costs_key(ngram)
    assert remembered_costs.costs_key(tiny) == remembered_costs.costs_key(load_tiny("tiny"))


def test_target_only_and_fixed_k_starts_remember_nothing(load_tiny):
    from specchat.chat.session import ChatSession
    from specchat.engine.adaptive import settings_for

    pair = load_tiny("tiny")
    auto = ChatSession(pair, settings=settings_for("auto", SamplingParams()), seed=0)
    auto.speculate = False
    auto.start_auto()
    ChatSession(pair, settings=settings_for(2, SamplingParams()), seed=0).start_auto()
    assert not (data_dir() / remembered_costs.REMEMBERED).exists()


def check(config, name: str = "tiny") -> str:
    from click.testing import CliRunner

    from specchat.cli import main

    result = CliRunner().invoke(main, ["pairs", "--config", str(config), "--check", name])
    assert result.exit_code == 0, result.output
    return result.output


def test_pairs_check_shows_the_costs_a_start_timed_and_predicts_them_before_any(
        service_of, timings, tiny_config, tmp_path):
    assert "predicted from weight bytes" in check(tiny_config)
    load(service_of())
    shown = check(tiny_config)
    assert "timed on this machine at" in shown and "predicted" not in shown.split("break-even")[0]
    v_row = next(line for line in shown.splitlines() if line.strip().startswith("v(n)"))
    assert v_row.split()[1:] == [f"{timings[0].v(n):.2f}" for n in timings[0].widths]
    assert f"draft step c = {timings[0].c:.2f}" in shown
    other = tmp_path / "models.toml"  # the same pair with another setting: not its timing
    other.write_text(tiny_config.read_text().replace('[pairs.tiny]', '[pairs.tiny]\nthreads = 1', 1))
    assert "predicted from weight bytes" in check(other)
