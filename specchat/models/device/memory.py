"""A pair's memory: sizes before loading, placement, and what a loaded pair holds.

Before loading: `check_draft_size` refuses a draft larger than its target, and
`plan_for` turns a pair's `device` / `max_memory` and the model's size (from
`estimate`, without loading) into a `placement.Placement`. After loading:
`memory_report` gives weights per model, KV cache bytes and, on CUDA, the peak
allocated since `reset_peak` (the loader calls it when loading ends, so after an
answer it is the answer's peak). Knows nothing about decoding or text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from specchat.errors import PairError
from specchat.models.device.estimate import model_size
from specchat.models.device.placement import Placement, current_inventory, plan_placement
from specchat.sizes import size_text


@dataclass(frozen=True)
class MemoryReport:
    """Bytes a loaded pair holds."""

    target_weights: int
    draft_weights: int
    kv_cache: int
    """Keys and values of both models as allocated now (a static cache: all of it)."""
    peak: int | None
    """torch.cuda.max_memory_allocated since loading ended; None off CUDA."""

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) lines for a stats block or a panel."""
        rows = [("memory: target weights", size_text(self.target_weights))]
        if self.draft_weights:
            rows.append(("memory: draft weights", size_text(self.draft_weights)))
        rows.append(("memory: KV cache", size_text(self.kv_cache)))
        if self.peak is not None:
            rows.append(("memory: peak (CUDA)", size_text(self.peak)))
        return rows


def memory_report(target, draft, device: str) -> MemoryReport:
    models = [m for m in (target, draft) if m is not None]
    kv = sum(int(getattr(m, "kv_cache_bytes", 0) or 0) for m in models)
    peak = None
    if device.startswith("cuda") and torch.cuda.is_available():
        peak = int(torch.cuda.max_memory_allocated(torch.device(device)))
    return MemoryReport(int(getattr(target, "parameter_bytes", 0)),
                        int(getattr(draft, "parameter_bytes", 0)) if draft is not None else 0,
                        kv, peak)


def reset_peak(device: str) -> None:
    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats(torch.device(device))


def check_draft_size(pair, target_folder: Path | str, draft_folder: Path | str | None) -> None:
    """A draft with more parameters than its target cannot speed it up: say so before loading."""
    if draft_folder is None:
        return
    target, draft = model_size(target_folder), model_size(draft_folder)
    if target is None or draft is None or draft.parameters <= target.parameters:
        return
    raise PairError(f"pair '{pair.name}': the draft {pair.draft} ({draft.parameters / 1e6:.0f}M "
                    f"parameters) is larger than its target {pair.target} "
                    f"({target.parameters / 1e6:.0f}M): swap them or pick a smaller draft")


def plan_for(pair, target_folder: Path | str, dtype: torch.dtype, inventory=None) -> Placement:
    """The target's placement for this pair on this machine (sizes read without loading)."""
    size = model_size(target_folder)
    if size is None:
        return plan_placement(0, pair.device, inventory or current_inventory())
    element = torch.empty((), dtype=dtype).element_size()
    weights = size.weight_bytes(element, pair.quantization)
    return plan_placement(weights, pair.device, inventory or current_inventory(),
                          pair.max_memory or None, name=f"target {pair.target}")


def main_device(model, planned: str) -> str:
    """Where inputs go and logits come back: the embedding's device under a device_map."""
    device_map = getattr(model, "hf_device_map", None)
    if not device_map:
        return planned
    return str(next(model.parameters()).device)
