"""A pair's step costs as last timed on this machine, remembered between starts.

k = "auto" starts from the pair's step costs (its prior, engine/adaptive.py): a verify of
each width and a draft step, relative to a plain step. Timing them took 2.2 s of the
default pair's 6.1 s load (2 cores of an AMD EPYC Zen 5, 2026-11-29), at every start of
the chat and of `run`. They depend on the models' shapes, the engines and the processor,
not on the conversation, so a start whose pair, engines and processor match a remembered
timing (`costs_key`) starts from it and times nothing. `pairs --check`, which loads
nothing, shows the newest timing whose settings, files and machine match
(`config_key`, the part of the key known before a load). The policy rescales its prior to
the plain step it times itself and learns every cost from its own rounds after that, and
the chat times the costs again with its baseline when idle (chat/baseline_timing.py),
which replaces them here too. The gauges' theory and speedup never read a remembered
timing, only their baseline's own.

A remembered timing is used for `FRESH_FOR_S` after it was taken: `run` never times the
costs again while one is remembered, so one taken on a busy moment would otherwise shape
its first rounds for good. One JSON file in the data folder (`REMEMBERED`), at most `KEEP`
entries, the newest first, written whole and renamed into place. A file that cannot be read or written is passed
over: the costs are timed as before, and nothing in it can stop a start. Knows nothing
about widgets.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specchat.chat.pair import Pair
from specchat.engine.costs import Costs
from specchat.models.config.cache_build import fingerprint
from specchat.paths import data_dir, write_whole

if TYPE_CHECKING:
    from specchat.models.config.pairs import PairConfig

REMEMBERED = "step-costs.json"
KEEP = 16
"""Entries kept: one per pair, engine and processor timed lately."""
FRESH_FOR_S = 7 * 24 * 3600
"""How long a timing is used after it was taken (a week)."""

log = logging.getLogger(__name__)


NOT_COSTS = ("name", "description", "source", "k", "sampling")
"""The pair settings a step's cost does not depend on (left out of `config_key`)."""


def config_key(config: PairConfig) -> str:
    """What a timing depends on that is known before the pair loads: specchat's and torch's
    versions, the machine's processors (the CPU's identity and every visible GPU's name), the
    pair's settings but its name, description and sampling, and each model file's or
    folder's `fingerprint` (size and modification time) where a reference names one."""
    import torch

    from specchat import __version__
    from specchat.models.device.cores import cpu_identity

    gpus = [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())]
    settings = {name: value for name, value in dataclasses.asdict(config).items()
                if name not in NOT_COSTS}
    files = [fingerprint(Path(str(ref)).expanduser()) for ref in (config.target, config.draft) if ref]
    return json.dumps({"specchat": __version__, "torch": torch.__version__,
                       "processors": [cpu_identity(), *gpus], "settings": settings,
                       "files": files}, sort_keys=True, default=str)


def costs_key(pair: Pair) -> str:
    """What a timing of `pair`'s step costs depends on: `config_key`, and what the load
    made of it: the models' weights' bytes and context, their engines as the loader
    describes them (kernels, threads), the device and the dtype."""
    return json.dumps({"config": config_key(pair.config),
                       "backends": getattr(pair, "backends", None) or {},
                       "device": pair.device_label, "dtype": str(pair.dtype),
                       "weights": pair.memory_bytes, "context": pair.context_length},
                      sort_keys=True)


def remembered_costs(pair: Pair, now: float | None = None) -> Costs | None:
    """The costs last timed for this pair on this processor, or None (none, or taken more
    than `FRESH_FOR_S` before `now`, or after it)."""
    key = costs_key(pair)
    found = _fresh([entry for entry in _entries() if entry.get("key") == key], now)
    return None if found is None else found[0]


def remembered_for_config(config: PairConfig, now: float | None = None) -> tuple[Costs, float] | None:
    """For a pair not loaded (`pairs --check`): the costs last timed for a pair of these
    settings and files on this machine, and when (seconds since the epoch), or None."""
    key = config_key(config)
    matching = [entry for entry in _entries() if _config_of(entry) == key]
    return _fresh(matching, now)


def _config_of(entry: dict[str, Any]) -> str | None:
    try:
        found = json.loads(entry["key"])["config"]
    except (KeyError, TypeError, ValueError):
        return None
    return found if isinstance(found, str) else None


def _fresh(entries: list[dict[str, Any]], now: float | None) -> tuple[Costs, float] | None:
    """The newest of `entries` (the file keeps the newest first) as (costs, when taken),
    where it was taken within `FRESH_FOR_S` before `now` and its record is whole."""
    now = time.time() if now is None else now
    if not entries:
        return None
    taken = entries[0].get("timed_at")
    if not isinstance(taken, (int, float)) or not 0 <= now - taken <= FRESH_FOR_S:
        return None
    costs = _costs(entries[0].get("costs"))
    return None if costs is None else (costs, float(taken))


def remember_costs(pair: Pair, costs: Costs) -> None:
    """Keep `costs` as this pair's latest timing (a failed write is logged, nothing more)."""
    key = costs_key(pair)
    record = {"target_step_s": costs.target_step_s, "draft_step_s": costs.draft_step_s,
              "verify_s": {str(width): s for width, s in costs.verify_s.items()}}
    entries: list[dict[str, Any]] = [{"key": key, "timed_at": time.time(), "costs": record}]
    entries += [entry for entry in _entries() if entry.get("key") != key][:KEEP - 1]
    path = data_dir() / REMEMBERED
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(path, json.dumps(entries, indent=1))
    except OSError as error:
        log.warning("step costs not remembered in %s: %s", path, error)


def _entries() -> list[dict[str, Any]]:
    """The remembered entries; none where the file is missing, unreadable or not ours."""
    try:
        found = json.loads(Path(data_dir() / REMEMBERED).read_text())
    except (OSError, ValueError):
        return []
    return [entry for entry in found if isinstance(entry, dict)] if isinstance(found, list) else []


def _costs(record: Any) -> Costs | None:
    """A remembered record as `Costs`; None for one that is not whole and positive."""
    try:
        verify = {int(width): float(s) for width, s in record["verify_s"].items()}
        draft = record["draft_step_s"]
        costs = Costs(float(record["target_step_s"]), None if draft is None else float(draft),
                      verify)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    timings = [costs.target_step_s, *verify.values(), costs.draft_step_s or 0.0]
    if (1 not in verify or costs.target_step_s <= 0
            or not all(math.isfinite(value) and value >= 0 for value in timings)):
        return None
    return costs
