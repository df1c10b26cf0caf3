"""`specchat pairs --check NAME`: will this pair fit here, and should it speculate?

For each model: parameters and weight bytes (read from safetensors headers or
config.json, without loading; in the dtype or quantization the pair loads it in)
and KV cache bytes per token; then the memory there is. Step costs are either
predicted (decoding one token at batch 1 reads every weight once, so the draft/
target cost ratio c is their weight-byte ratio and a verify of k + 1 tokens costs
v = 1 step; true on a GPU, optimistic on a CPU) or measured (`--measure`: the pair
is loaded and a few steps are timed; noisy on a busy machine). With the draft's
expected acceptance α (a `specchat distill` draft records its held-out rate) the
cost model (`theory.ideal_speedup`) says whether speculation should pay, and the α
at which it breaks even. Knows nothing about the TUI.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from specchat.engine.theory import ideal_speedup

ASSUMED_ALPHAS = (0.5, 0.6, 0.7, 0.8)
"""Acceptance rates shown when the draft's own is unknown."""


@dataclass(frozen=True)
class ModelFacts:
    """One model of a pair, sized without loading it."""

    role: str
    ref: str
    parameters: int
    weight_bytes: int
    kv_bytes_per_token: int
    source: str


@dataclass(frozen=True)
class StepCosts:
    """Draft/target step cost ratio c and verify cost v (in target steps), and how known."""

    cost_ratio: float
    verify_cost: float
    how: str


def predicted_costs(target: ModelFacts, draft: ModelFacts | None) -> StepCosts:
    """Memory-bound decoding: a step costs its weight bytes; a short verify costs one step."""
    if draft is None:
        return StepCosts(0.0, 1.0, "predicted: n-gram lookup costs no model step")
    return StepCosts(draft.weight_bytes / target.weight_bytes, 1.0,
                     "predicted from weight bytes (memory-bound; optimistic on a CPU)")


def measured_costs(target, draft, k: int, repeats: int = 15) -> StepCosts:
    """c and v(k + 1) from timed forwards of loaded adapters (median of `repeats`)."""
    context = torch.arange(3, 35)
    step = median_time(target, context, 1, repeats)
    verify = median_time(target, context, k + 1, repeats)
    if draft is None:
        return StepCosts(0.0, verify / step, f"measured: {repeats} timed steps of the target")
    return StepCosts(median_time(draft, context, 1, repeats) / step, verify / step,
                     f"measured: median of {repeats} timed steps per model on {target.device}")


def median_time(model, context: torch.Tensor, width: int, repeats: int) -> float:
    """Median seconds of a `width`-token forward after `context`, rolled back each time."""
    model.reset()
    model.forward(context.to(model.device))
    times = []
    for _ in range(repeats + 3):
        started = time.perf_counter()
        model.forward(context[:width].to(model.device), keep=width)
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
        model.crop(len(context))
    timed = sorted(times[3:])  # the first calls at a width pay for allocations
    return timed[len(timed) // 2]


def break_even_alpha(k: int, costs: StepCosts) -> float | None:
    """The α at which the ideal speedup is 1 (bisection), or None if even α = 1 loses."""
    if ideal_speedup(0.999999, k, costs.cost_ratio, costs.verify_cost) < 1:
        return None
    low, high = 0.0, 0.999999
    for _ in range(50):
        mid = (low + high) / 2
        if ideal_speedup(mid, k, costs.cost_ratio, costs.verify_cost) < 1:
            low = mid
        else:
            high = mid
    return high


def verdict_lines(k: int, costs: StepCosts, alpha: float | None, alpha_why: str) -> list[str]:
    """What the cost model expects at the draft's α (or at a few assumed ones)."""
    lines = [f"step costs ({costs.how}): draft/target c = {costs.cost_ratio:.2f}, "
             f"verify of {k + 1} tokens v = {costs.verify_cost:.2f} target steps"]
    alphas = [alpha] if alpha is not None else list(ASSUMED_ALPHAS)
    for a in alphas:
        speedup = ideal_speedup(a, k, costs.cost_ratio, costs.verify_cost)
        word = "expected to pay" if speedup > 1 else "expected to LOSE"
        lines.append(f"at α = {a:.2f}{' (' + alpha_why + ')' if alpha is not None else ''}, "
                     f"k = {k}: ideal speedup {speedup:.2f}x, speculation {word}")
    even = break_even_alpha(k, costs)
    lines.append("break-even: " + (f"α ≥ {even:.2f} at k = {k}" if even is not None
                                   else f"none at k = {k}: the draft costs too much"))
    return lines


def model_facts(role: str, ref: str, folder: Path | str, dtype: torch.dtype,
                quantization: str) -> ModelFacts | None:
    import json

    from specchat.models.device.estimate import kv_bytes_per_token, model_size

    size = model_size(folder)
    if size is None:
        return None
    element = torch.empty((), dtype=dtype).element_size()
    config_file = Path(folder) / "config.json"
    kv = 0
    if config_file.is_file():
        kv = kv_bytes_per_token(json.loads(config_file.read_text()), element)
    return ModelFacts(role, ref, size.parameters, size.weight_bytes(element, quantization), kv,
                      size.source)


def facts_line(facts: ModelFacts, context: int) -> str:
    return (f"{facts.role:<6} {facts.ref}: {facts.parameters / 1e6:.1f}M parameters, weights "
            f"{size_text(facts.weight_bytes)}, KV cache {facts.kv_bytes_per_token / 1024:.1f} KiB/token "
            f"({size_text(facts.kv_bytes_per_token * context)} at {context} tokens) [{facts.source}]")


def size_text(size: int) -> str:
    """MiB under a GiB, GiB above."""
    return f"{size / (1 << 20):.1f} MiB" if size < 1 << 30 else f"{size / (1 << 30):.2f} GiB"


def expected_alpha(folder: Path | str | None) -> tuple[float | None, str]:
    """The draft's held-out acceptance where `specchat distill` recorded it."""
    if folder is None:
        return None, ""
    from specchat.models.torch_backend.shipped_draft import SPEC_FILE, DraftSpec

    if not (Path(folder) / SPEC_FILE).is_file():
        return None, ""
    rate = DraftSpec.load(Path(folder)).info.get("heldout_acceptance")
    return (float(rate), "the draft's held-out acceptance") if rate else (None, "")


def check_lines(pair, measure: bool = False, progress=lambda _: None) -> list[str]:
    """The whole `pairs --check` report for one pair on this machine."""
    from specchat.models.device.hardware import dtype_name, resolve_device, resolve_dtype
    from specchat.models.loader import context_tokens, draft_folder, model_folder
    from specchat.models.config.refs import parse_ref

    device, why = resolve_device(pair.device)
    dtype, _ = resolve_dtype(pair.dtype, device)
    target_folder = model_folder(parse_ref(pair.target), progress)
    target = model_facts("target", pair.target, target_folder, dtype, pair.quantization)
    folder = draft_folder(pair, progress)
    draft = model_facts("draft", pair.draft, folder, dtype, pair.draft_quantization) if folder else None
    lines = [f"pair {pair.name} on this machine: {device} ({why}), {dtype_name(dtype)}"]
    if target is None:
        return lines + [f"target {pair.target}: size unknown (no safetensors or config.json)"]
    context = context_tokens(target_folder, device)
    lines += [facts_line(f, context) for f in (target, draft) if f is not None]
    lines += memory_lines(pair, target, draft, context)
    k = pair.k if isinstance(pair.k, int) else 3
    if pair.draft is None or k == 0:
        return lines + ["no draft (k = 0): plain decoding, nothing to predict"]
    costs = loaded_costs(pair, k, progress) if measure else predicted_costs(target, draft)
    alpha, alpha_why = expected_alpha(folder)
    if isinstance(pair.k, str):
        lines.append(f"k = {pair.k}: shown at k = {k}")
    if draft is None:
        lines.append("n-gram drafts pay where the answer repeats the prompt (extraction, code "
                     "edits), rarely on open chat")
    return lines + verdict_lines(k, costs, alpha, alpha_why)


def memory_lines(pair, target: ModelFacts, draft: ModelFacts | None, context: int) -> list[str]:
    from specchat.errors import OutOfMemory
    from specchat.models.device.placement import (automatic_limits, current_inventory, describe,
                                           plan_placement)

    models = [m for m in (target, draft) if m is not None]
    total = sum(m.weight_bytes + m.kv_bytes_per_token * context for m in models)
    inventory = current_inventory()
    lines = [f"memory: about {size_text(total)} in all (weights + KV cache at {context} tokens); "
             f"available: {describe(automatic_limits(inventory))}"]
    try:
        place = plan_placement(target.weight_bytes, pair.device, inventory, pair.max_memory,
                               name=f"target {pair.target}")
        lines.append(f"placement: {place.why or place.device}")
    except OutOfMemory as error:
        lines.append(f"does NOT fit: {error}")
    return lines


def loaded_costs(pair, k: int, progress) -> StepCosts:
    from specchat.models.loader import load_pair

    loaded = load_pair(pair, progress=progress)
    return measured_costs(loaded.target, loaded.draft_model, k)
