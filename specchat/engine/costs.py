"""Step costs: what one plain decoding step, an n-token verify and one draft step cost
on this machine (`Costs`), and the timed forwards that measure them, for any engine
`CausalModel` and drafter.

These are the measurements the cost model of docs/design.md §4 needs (c and v(n)), taken
from forwards of their own, never from the speed of the answer they are meant to
predict. The one owner of step costs: `bench profile`, the chat's target-only
`Baseline`, k = "auto"'s starting point and `pairs --check` all hold a `Costs` and time
it here. `Costs` is plain arithmetic and torch is imported only by the timing functions,
so the TUI's gauges can hold one. Knows nothing about text, reports or UIs.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Sequence

from specchat.engine.params import K_MAX, PRIOR_K_MAX, SamplingParams

if TYPE_CHECKING:
    import torch

    from specchat.engine.decoder import Drafter
    from specchat.engine.protocol import CausalModel, DraftHead

WIDTHS = tuple(range(1, K_MAX + 2))
"""Verify widths `bench profile` times: every fixed k's k + 1."""
PRIOR_WIDTHS = tuple(range(1, PRIOR_K_MAX + 2))
"""The verify widths timed before an answer: every k up to PRIOR_K_MAX, plus one."""
EXTENSION_POINTS = 4
"""How many of the widest timed widths the extension line is fitted through (the curve's
slope where it ends: on a GPU v(n) is flat at first and rises later)."""


WARMUP_STEPS = 3
"""Untimed one-token steps after the prefill (and one of the widest width) before any
forward is timed: the first steps after a prefill or a load can cost many times a
steady one (a draft step once took 2.7 s against 50 ms: weights paged in, threads woken)."""

Clock = Callable[[], float]


def synchronize(device: torch.device | None) -> None:
    """Wait for the device's queued work (a CUDA device's; None: the host's own, nothing)."""
    if device is not None and device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def median_seconds(call: Callable[[], object], repeats: int, device: torch.device | None = None,
                   clock: Clock = time.perf_counter) -> float:
    """Median seconds of `repeats` calls, `device` synchronized around each (None: a call
    that works on the host, such as llama.cpp's)."""
    samples = []
    for _ in range(repeats):
        synchronize(device)
        started = clock()
        call()
        synchronize(device)
        samples.append(clock() - started)
    return statistics.median(samples)


def filler_ids(context: list[int], length: int) -> list[int]:
    """`context` repeated and cut to `length` tokens (attention cost depends on length only)."""
    return (context * (length // max(1, len(context)) + 1))[:length]


class StepTimer:
    """Forwards of one model after `context`, for timing: prefilled once and warmed up
    (`WARMUP_STEPS`), its cache rolled back to the context after each forward."""

    def __init__(self, model: CausalModel, context: list[int], widths: Sequence[int] = WIDTHS,
                 warmup: int = WARMUP_STEPS):
        import torch

        self.model = model
        self.ids = torch.tensor(filler_ids(context, max(widths)), device=model.device)
        model.reset()
        model.forward(torch.tensor(context, device=model.device))
        self.base = model.cache_length
        self.step(max(widths))  # on CUDA, the widest graph captured outside the timings
        for _ in range(warmup):
            self.step(1)

    def step(self, width: int) -> None:
        self.model.forward(self.ids[:width], keep=width)
        self.model.crop(self.base)

    def seconds(self, width: int, repeats: int, clock: Clock = time.perf_counter) -> float:
        """Median seconds of `repeats` forwards of `width` tokens, back to back."""
        return median_seconds(lambda: self.step(width), repeats, self.model.device, clock)


def verify_costs(model: CausalModel, context: list[int], widths: Sequence[int] = WIDTHS,
                 repeats: int = 5) -> dict[int, float]:
    """Median seconds of one forward of n tokens after `context`, cache rolled back each time.

    Each width's repeats run back to back, as decoding runs them (llama.cpp reuses its
    compute graph while the batch shape stays the same: timing the widths in turn made a
    one-token step look as dear as a 2-token verify). A wider forward is never reported
    cheaper than a narrower one (under a parallel test run a 2-token verify once read 0.11
    of a one-token step)."""
    timer = StepTimer(model, context, widths)
    return monotone({w: timer.seconds(w, repeats) for w in widths})


def monotone(costs: dict[int, float]) -> dict[int, float]:
    """Each width's cost raised to the largest cost of any narrower width."""
    out, highest = {}, 0.0
    for width in sorted(costs):
        highest = max(highest, costs[width])
        out[width] = highest
    return out


def least_squares(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through (x, y) points, its slope never
    below 0 (a wider forward, or one over a longer context, never costs less); a flat line
    through the mean where the points share one x. The one fit of every cost line: verify
    widths here and in engine/adaptive.py, context lengths in chat/baseline.py."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return mean_y, 0.0
    slope = max(sum((x - mean_x) * (y - mean_y) for x, y in points) / spread, 0.0)
    return mean_y - slope * mean_x, slope


def fit_line(points: dict[int, float]) -> Callable[[float], float]:
    """The least-squares line through (width, seconds) points, as a function of width."""
    intercept, slope = least_squares(list(points.items()))
    return lambda x: intercept + slope * x


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


class HeadStepTimer:
    """One-row steps of a draft head after `context` (its rows read zero features: the cost
    does not depend on their values), for timing; warmed up like `StepTimer`."""

    def __init__(self, head: DraftHead, context: list[int], warmup: int = WARMUP_STEPS):
        import torch

        self.head = head
        ids = torch.tensor(context, device=head.device)
        head.reset()
        head.forward(torch.zeros(len(context), head.hidden_size, device=head.device), ids)
        self.base = head.cache_length
        self.feature = torch.zeros(1, head.hidden_size, device=head.device)
        self.token = ids[-1:]
        for _ in range(warmup):
            self.step()

    def step(self) -> None:
        self.head.forward(self.feature, self.token, keep=1)
        self.head.crop(self.base)

    def seconds(self, repeats: int, clock: Clock = time.perf_counter) -> float:
        return median_seconds(self.step, repeats, self.head.device, clock)


def draft_timer(drafter: Drafter | None,
                context: list[int]) -> Callable[[int, Clock], float] | None:
    """seconds(repeats, clock) per drafted token for `drafter` (a draft model or a draft
    head, warmed up after its prefill, or an n-gram lookup of the longest draft, K_MAX
    tokens, over its length); None for no drafter. Behind prompt lookup (a
    `LookupFirstDrafter`) it is the model's or head's step: the lookup's rounds cost nothing,
    and k = auto sizes them apart (adaptive.py)."""
    import torch

    from specchat.engine.drafters import LookupFirstDrafter, ModelDrafter
    from specchat.engine.head_drafter import HeadDrafter

    if drafter is None:
        return None
    if isinstance(drafter, LookupFirstDrafter):
        return draft_timer(drafter.drafter, context)
    if isinstance(drafter, ModelDrafter):
        timer = StepTimer(drafter.model, context, widths=(1,))
        return lambda repeats, clock: timer.seconds(1, repeats, clock)
    if isinstance(drafter, HeadDrafter):
        head_timer = HeadStepTimer(drafter.head, context)
        return lambda repeats, clock: head_timer.seconds(repeats, clock)
    sequence = torch.tensor(context * 4)
    propose = lambda: drafter.propose(sequence, K_MAX, SamplingParams(), None)
    return lambda repeats, clock: median_seconds(propose, repeats, sequence.device, clock) / K_MAX


def draft_step_cost(drafter: Drafter | None, context: list[int], repeats: int = 5) -> float:
    """Seconds per drafted token: a draft model's one-token step, or one n-gram lookup."""
    timer = draft_timer(drafter, context)
    return 0.0 if timer is None else timer(repeats, time.perf_counter)


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
        table = self._verify_table
        return table[width] if width in table else extended(self.verify_s, width)

    @cached_property
    def _verify_table(self) -> dict[int, float]:
        """`extended` at every width a decoder verifies (WIDTHS: 1..K_MAX + 1), worked out
        once per `Costs`: adaptive k asks for them every round, and each width beyond the
        timed ones would fit the extension line again. (A frozen dataclass without slots:
        the table lives in the instance's __dict__, outside the fields that eq and
        replace see.)"""
        return {width: extended(self.verify_s, width) for width in WIDTHS}

    def v(self, width: int) -> float:
        """v(n): a verify of `width` tokens relative to a plain step (`verify_seconds`)."""
        return self.verify_seconds(width) / self.target_step_s

    @property
    def widths(self) -> list[int]:
        return sorted(self.verify_s)

    def report(self) -> dict[str, object]:
        """The costs as a report shows them: steps in milliseconds, c and v(n)."""
        draft_ms = None if self.draft_step_s is None else self.draft_step_s * 1000
        return {"target_step_ms": self.target_step_s * 1000, "draft_step_ms": draft_ms,
                "c": self.c, "verify_ms": {w: s * 1000 for w, s in self.verify_s.items()},
                "v": {w: self.v(w) for w in self.verify_s}}


def measure_costs(target: CausalModel, drafter: Drafter | None, context: list[int],
                  widths: Sequence[int] = WIDTHS, repeats: int = 5,
                  no_drafter: float | None = 0.0,
                  should_stop: Callable[[], bool] = lambda: False) -> Costs:
    """Verify costs of `target` at each width and the drafter's step cost (`no_drafter`
    where `drafter` is None: 0.0 for plain decoding's free "draft", None for none): one
    round of `time_rounds`, each cost the median of its `repeats` forwards."""
    return time_rounds(target, drafter, context, widths, rounds=1, repeats=repeats,
                       no_drafter=no_drafter, should_stop=should_stop).costs


class TimingStopped(Exception):
    """`should_stop` said so between two timed steps (a question waits for the model)."""


ROUNDS = 5
"""Interleaved rounds `time_rounds` times by default (each times every width and the draft step)."""
MAX_SPREAD = 0.25
"""The largest spread of one step's timings over the rounds that a verdict is given on."""
C_FACTOR = 3.0
C_CEILING = 1.5
"""A draft step c is plausible within a factor C_FACTOR of the draft/target weight-size
ratio (its value where decoding reads every weight once, as on a CPU or a GPU at batch 1):
above it up to C_CEILING, since fixed per-step costs (kernel launches, tiny models) can
make a small draft cost nearly a target step, never much more."""


@dataclass(frozen=True)
class TimedCosts:
    """Step costs timed in interleaved rounds: each cost the median over the rounds."""

    costs: Costs
    spread: float
    """The largest spread of any one step's timings over the rounds: (slowest - fastest)
    relative to the step's median, or to the target step's for a cheaper draft step (a
    lookup's microseconds of jitter weigh nothing beside a target step); 0 for one round."""
    rounds: int
    repeats: int

    def report(self) -> dict[str, object]:
        return self.costs.report() | {"spread": self.spread, "rounds": self.rounds,
                                      "repeats": self.repeats}


def time_rounds(target: CausalModel, drafter: Drafter | None, context: list[int],
                widths: Sequence[int] = WIDTHS, rounds: int = ROUNDS,
                repeats: int = 3, no_drafter: float | None = 0.0,
                clock: Clock = time.perf_counter,
                should_stop: Callable[[], bool] = lambda: False) -> TimedCosts:
    """Verify costs of `target` at each width and the drafter's step cost (`no_drafter`
    where `drafter` is None), with each model warmed up first and the timings interleaved:
    `rounds` times over, every width's `repeats` forwards and the draft's, so a burst of
    load on the machine lands in one round rather than in one width. `TimingStopped` where
    `should_stop` says so before a width or a draft step is timed."""

    def check() -> None:
        if should_stop():
            raise TimingStopped

    verify = StepTimer(target, context, widths)
    check()
    draft = draft_timer(drafter, context)
    samples: dict[int, list[float]] = {width: [] for width in widths}
    drafts: list[float] = []
    for _ in range(rounds):
        for width in widths:
            check()
            samples[width].append(verify.seconds(width, repeats, clock))
        if draft is not None:
            check()
            drafts.append(draft(repeats, clock))
    medians = monotone({width: statistics.median(s) for width, s in samples.items()})
    draft_s = statistics.median(drafts) if drafts else no_drafter
    step = medians[min(medians)]
    worst = max(spread(s, step) for s in [*samples.values(), drafts])
    return TimedCosts(Costs.of(medians, draft_s), worst, rounds, repeats)


def spread(samples: list[float], floor: float = 0.0) -> float:
    """(slowest - fastest) of `samples` relative to their median or `floor`, whichever is
    larger; 0 for fewer than two."""
    if len(samples) < 2:
        return 0.0
    scale = max(statistics.median(samples), floor)
    return (max(samples) - min(samples)) / scale if scale > 0 else float("inf")


def unsteady(timed: TimedCosts, expected_c: float | None = None) -> str | None:
    """Why `timed` cannot be trusted, or None: a spread over MAX_SPREAD, or a draft step c
    outside the plausible range around `expected_c` (the draft/target weight-size ratio)."""
    if timed.spread > MAX_SPREAD:
        return f"the machine is busy: {timed.spread:.0%} spread between repeated timings"
    c = timed.costs.c
    if expected_c and c is not None and not expected_c / C_FACTOR <= c <= max(
            C_FACTOR * expected_c, C_CEILING):
        return (f"the timings look disturbed: draft step c = {c:.2f}, far from the weight-size "
                f"ratio {expected_c:.2f}")
    return None


def steady_costs(measure: Callable[[], TimedCosts], expected_c: float | None = None,
                 attempts: int = 3) -> tuple[TimedCosts, str | None]:
    """`measure()` until its timings are steady (`unsteady`), at most `attempts` times:
    (the first steady timing or else the least spread one, why it is unsteady or None)."""
    tried: list[TimedCosts] = []
    for _ in range(max(1, attempts)):
        tried.append(measure())
        if unsteady(tried[-1], expected_c) is None:
            return tried[-1], None
    best = min(tried, key=lambda timed: timed.spread)
    return best, unsteady(best, expected_c)
