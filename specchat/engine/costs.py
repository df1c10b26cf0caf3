"""Step costs: what one plain decoding step, an n-token verify and one draft step cost
on this machine (`Costs`), and the timed forwards that measure them, for any engine
`CausalModel` and drafter.

These are the measurements the cost model of DESIGN.md §4 needs (c and v(n)), taken
from forwards of their own, never from the speed of the answer they are meant to
predict. The one owner of step costs: `bench profile`, the chat's calibration and its
`Baseline`, k = "auto"'s starting point and `pairs --check` all hold a `Costs` and time
it here. `Costs` is plain arithmetic and torch is imported only by the timing functions,
so the TUI's gauges can hold one. Knows nothing about text, reports or UIs.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specchat.engine.params import K_MAX, SamplingParams

if TYPE_CHECKING:
    import torch

WIDTHS = tuple(range(1, K_MAX + 2))
"""Verify widths `bench profile` times: every fixed k's k + 1."""


def synchronize(device: torch.device | None) -> None:
    """Wait for the device's queued work (a CUDA device's; None: the host's own, nothing)."""
    if device is not None and device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def median_seconds(call, repeats: int, device: torch.device | None = None) -> float:
    """Median seconds of `repeats` calls, `device` synchronized around each (None: a call
    that works on the host, such as llama.cpp's)."""
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
    import torch

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
    """Seconds per drafted token: a draft model's one-token step, or an n-gram lookup of the
    longest draft (K_MAX tokens) over its length."""
    import torch

    from specchat.engine.drafters import ModelDrafter

    if isinstance(drafter, ModelDrafter):
        return verify_costs(drafter.model, context, widths=(1,), repeats=repeats)[1]
    if drafter is None:
        return 0.0
    sequence = torch.tensor(context * 4)
    propose = lambda: drafter.propose(sequence, K_MAX, SamplingParams(), None)
    return median_seconds(propose, repeats, sequence.device) / K_MAX


@dataclass(frozen=True)
class Costs:
    """Step costs of a pair; the ratios c and v(n) are relative to one plain decoding step
    (the target's one-token forward)."""

    target_step_s: float
    """Seconds of one plain decoding step."""
    draft_step_s: float | None
    """Seconds per drafted token (0 for a drafter that costs nothing); None: no drafter."""
    verify_s: dict[int, float] = field(default_factory=dict)
    """n -> seconds of one target forward over n tokens."""

    @classmethod
    def of(cls, verify_s: dict[int, float], draft_step_s: float | None) -> "Costs":
        """Costs whose plain step is the one-token verify (how every measurement here times it)."""
        return cls(verify_s[1], draft_step_s, dict(verify_s))

    @property
    def c(self) -> float | None:
        """Draft step cost relative to a plain step; None without a drafter."""
        return None if self.draft_step_s is None else self.draft_step_s / self.target_step_s

    def v(self, width: int) -> float:
        """v(n): a verify of `width` tokens relative to a plain step (beyond the widest
        timed width, the widest's)."""
        return self.verify_s[min(width, max(self.verify_s))] / self.target_step_s

    @property
    def widths(self) -> list[int]:
        return sorted(self.verify_s)

    def report(self) -> dict:
        """The costs as a report shows them: steps in milliseconds, c and v(n)."""
        draft_ms = None if self.draft_step_s is None else self.draft_step_s * 1000
        return {"target_step_ms": self.target_step_s * 1000, "draft_step_ms": draft_ms,
                "c": self.c, "verify_ms": {w: s * 1000 for w, s in self.verify_s.items()},
                "v": {w: self.v(w) for w in self.verify_s}}


def measure_costs(target, drafter, context: list[int], widths=WIDTHS, repeats: int = 5,
                  no_drafter: float | None = 0.0) -> Costs:
    """Verify costs of `target` at each width and the drafter's step cost (`no_drafter`
    where `drafter` is None: 0.0 for plain decoding's free "draft", None for none)."""
    verify = verify_costs(target, context, widths, repeats=repeats)
    draft = no_drafter if drafter is None else draft_step_cost(drafter, context, repeats)
    return Costs.of(verify, draft)
