"""A pair's step costs as last timed on this machine, remembered between starts.

k = "auto" starts from the pair's step costs (its prior, engine/adaptive.py): a verify of
each width and a draft step, relative to a plain step. Timing them took 2.2 s of the
default pair's 6.1 s load (2 cores of an AMD EPYC Zen 5, 2026-11-29), at every start of
the chat and of `run`. They depend on the models' shapes, the engines and the processor,
not on the conversation, so a start whose pair, engines and processor match a remembered
timing (`costs_key`) starts from it and times nothing. The policy rescales its prior to
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

import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any

from specchat.chat.pair import Pair
from specchat.engine.costs import Costs
from specchat.paths import data_dir

REMEMBERED = "step-costs.json"
KEEP = 16
"""Entries kept: one per pair, engine and processor timed lately."""
FRESH_FOR_S = 7 * 24 * 3600
"""How long a timing is used after it was taken (a week)."""

log = logging.getLogger(__name__)


def costs_key(pair: Pair) -> str:
    """What a timing of `pair`'s step costs depends on: specchat's and torch's versions, the
    models (references, weights' bytes, context), their engines as the loader describes
    them (kernels, threads), the device, the dtype and the processor."""
    import torch

    from specchat import __version__
    from specchat.models.device.cores import cpu_identity

    config = pair.config
    processor = (torch.cuda.get_device_name(pair.device) if str(pair.device).startswith("cuda")
                 else cpu_identity())
    return json.dumps({"specchat": __version__, "torch": torch.__version__,
                       "target": str(config.target), "draft": str(config.draft),
                       "backends": getattr(pair, "backends", None) or {},
                       "device": pair.device_label, "dtype": str(pair.dtype),
                       "weights": pair.memory_bytes, "context": pair.context_length,
                       "processor": processor}, sort_keys=True)


def remembered_costs(pair: Pair, now: float | None = None) -> Costs | None:
    """The costs last timed for this pair on this processor, or None (none, or taken more
    than `FRESH_FOR_S` before `now`, or after it)."""
    key, now = costs_key(pair), time.time() if now is None else now
    found = [entry for entry in _entries() if entry.get("key") == key]
    taken = found[0].get("timed_at") if found else None
    if not isinstance(taken, (int, float)) or not 0 <= now - taken <= FRESH_FOR_S:
        return None
    return _costs(found[0].get("costs"))


def remember_costs(pair: Pair, costs: Costs) -> None:
    """Keep `costs` as this pair's latest timing (a failed write is logged, nothing more)."""
    key = costs_key(pair)
    record = {"target_step_s": costs.target_step_s, "draft_step_s": costs.draft_step_s,
              "verify_s": {str(width): s for width, s in costs.verify_s.items()}}
    entries: list[dict[str, Any]] = [{"key": key, "timed_at": time.time(), "costs": record}]
    entries += [entry for entry in _entries() if entry.get("key") != key][:KEEP - 1]
    path = data_dir() / REMEMBERED
    partial = path.with_name(f"{REMEMBERED}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps(entries, indent=1))
        os.replace(partial, path)
    except OSError as error:
        log.warning("step costs not remembered in %s: %s", path, error)
        partial.unlink(missing_ok=True)


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
