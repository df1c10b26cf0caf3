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
PRIOR_K_MAX = 8
"""The longest draft whose verify is timed before an answer (the chat's calibration,
k = "auto"'s prior in `run` and `bench`, `pairs --check` for an "auto" pair). Adaptive k
still chooses up to K_MAX: a wider verify costs the line through the widest timed ones,
extended (`Costs.verify_seconds`). Timing every width to K_MAX + 1 would take about three
times as long (on a CPU a verify of n tokens costs about 0.6·n plain steps beyond n = 4:
widths 10..17 cost twice 1..9 together) for draft lengths that rarely win."""
PRIOR_WIDTHS = tuple(range(1, PRIOR_K_MAX + 2))
"""The verify widths timed before an answer: every k up to PRIOR_K_MAX, plus one."""
EXTENSION_POINTS = 4
"""How many of the widest timed widths the extension line is fitted through (the curve's
slope where it ends: on a GPU v(n) is flat at first and rises later)."""


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        import torch

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


def fit_line(points: dict[int, float]):
    """Least-squares line through (width, seconds) points, as a function of width (its slope
    never below 0: a wider forward never costs less)."""
    n = len(points)
    mean_x = sum(points) / n
    mean_y = sum(points.values()) / n
    spread = sum((x - mean_x) ** 2 for x in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points.items()) / spread
    slope = max(slope, 0.0)
    return lambda x: mean_y + slope * (x - mean_x)


def extended(points: dict[int, float], width: int) -> float:
    """Seconds of a verify of `width` tokens from timed widths: its own; beyond the widest,
    the line through the widest EXTENSION_POINTS extended (never below the widest's); in a
    gap, the next wider timed width's."""
    if width in points:
        return points[width]
    widest = max(points)
    if width > widest:
        if len(points) < 2:
            return points[widest]
        top = {w: points[w] for w in sorted(points)[-EXTENSION_POINTS:]}
        return max(fit_line(top)(width), points[widest])
    return points[min(w for w in points if w > width)]


def draft_step_cost(drafter, context: list[int], repeats: int = 5) -> float:
    """Seconds per drafted token: a draft model's one-token step, or one n-gram lookup."""
    import torch

    from specchat.engine.drafters import ModelDrafter

    if isinstance(drafter, ModelDrafter):
        return verify_costs(drafter.model, context, widths=(1,), repeats=repeats)[1]
    if drafter is None:
        return 0.0
    sequence = torch.tensor(context * 4)
    propose = lambda: drafter.propose(sequence, 8, SamplingParams(), None)
    return median_seconds(propose, repeats, sequence.device) / 8


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

    def verify_seconds(self, width: int) -> float:
        """Seconds of a verify of `width` tokens: timed, or extended from the timed widths
        (`extended`: beyond the widest, along the line through the widest few)."""
        return extended(self.verify_s, width)

    def v(self, width: int) -> float:
        """v(n): a verify of `width` tokens relative to a plain step (`verify_seconds`)."""
        return self.verify_seconds(width) / self.target_step_s

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
