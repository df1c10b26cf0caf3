"""Timed forwards: what one plain decoding step, an n-token verify and one draft step
cost on this machine, for any engine `CausalModel` and drafter.

These are the measurements the cost model of DESIGN.md §4 needs (c and v(n)),
taken from forwards of their own, never from the speed of the answer they are meant
to predict. `bench profile` and the chat's live calibration both use them.
Knows nothing about text, reports or UIs.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch

from specchat.engine.drafters import ModelDrafter
from specchat.engine.sampling import SamplingParams

WIDTHS = tuple(range(1, 17))


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(call, repeats: int, device: torch.device) -> float:
    samples = []
    for _ in range(repeats):
        synchronize(device)
        started = time.perf_counter()
        call()
        synchronize(device)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def filler_ids(context: list[int], length: int) -> list[int]:
    """`context` repeated and cut to `length` tokens (attention cost depends on length only)."""
    return (context * (length // max(1, len(context)) + 1))[:length]


def verify_costs(model, context: list[int], widths=WIDTHS, repeats: int = 5) -> dict[int, float]:
    """Median seconds of one forward of n tokens after `context`, cache rolled back each time.

    Each width's repeats run back to back, as decoding runs them (llama.cpp reuses its
    compute graph while the batch shape stays the same: timing the widths in turn made a
    one-token step look as dear as a 2-token verify). A wider forward is never reported
    cheaper than a narrower one (under a parallel test run a 2-token verify once read 0.11
    of a one-token step)."""
    model.reset()
    model.forward(torch.tensor(context, device=model.device))
    base = model.cache_length
    ids = torch.tensor(filler_ids(context, max(widths)), device=model.device)

    def one(width: int):
        model.forward(ids[:width], keep=width)
        model.crop(base)

    one(max(widths))  # warm-up (and, on CUDA, graph capture) outside the timings
    return monotone({w: median_seconds(lambda w=w: one(w), repeats, model.device) for w in widths})


def monotone(costs: dict[int, float]) -> dict[int, float]:
    """Each width's cost raised to the largest cost of any narrower width."""
    out, highest = {}, 0.0
    for width in sorted(costs):
        highest = max(highest, costs[width])
        out[width] = highest
    return out


def draft_step_cost(drafter, context: list[int], repeats: int = 5) -> float:
    """Seconds per drafted token: a draft model's one-token step, or one n-gram lookup."""
    if isinstance(drafter, ModelDrafter):
        return verify_costs(drafter.model, context, widths=(1,), repeats=repeats)[1]
    if drafter is None:
        return 0.0
    sequence = torch.tensor(context * 4)
    propose = lambda: drafter.propose(sequence, 8, SamplingParams(), None)
    return median_seconds(propose, repeats, sequence.device) / 8


@dataclass
class Costs:
    """Measured step costs; ratios are relative to one plain decoding step."""

    target_step_s: float
    draft_step_s: float
    verify_s: dict[int, float] = field(default_factory=dict)

    @property
    def c(self) -> float:
        return self.draft_step_s / self.target_step_s

    def v(self, width: int) -> float:
        return self.verify_s[min(width, max(self.verify_s))] / self.target_step_s


def measure_costs(target, drafter, context: list[int], widths=WIDTHS, repeats: int = 5) -> Costs:
    verify = verify_costs(target, context, widths, repeats=repeats)
    return Costs(verify[1], draft_step_cost(drafter, context, repeats), verify)
