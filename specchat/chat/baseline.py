"""The target-only baseline an answer is compared with, and what it predicts.

A `Baseline` is measured on the loaded pair (chat/baseline_timing.py): the cost of one
plain decoding step at several context lengths (the real target-only loop, with the
answer's sampling settings), fitted as a line (a decoding step reads every weight once
and attends over the context, so its cost grows linearly with the context), plus the
step `Costs` of engine/costs.py: timed forwards of n-token verifies and one draft step.
The chat measures it again while idle until `settled_passes` passes are `merged`: one
pass on a shared machine can be off at every context at once.

From it:
- `gauge_speedup`: target-only time over the answer's own decode span (the same context
  lengths, the same sampling), scaled by the load the answer ran under, divided by the
  answer's decode time;
- `load_factor`: how much slower the answer's own rounds (draft steps and target
  forwards) ran than the same work measured idle. While the chat draws an answer, the
  screen takes CPU time (and, on torch, the interpreter lock) from the model, and other
  programs may too; a target-only run at that moment would pay the same, so the idle
  cost curve is scaled by it. The whole round counts, not the target's forward alone:
  a frame is drawn right after a round is posted, so it lands on the next round's
  drafting. The race (F5) measures both under the same load directly;
- `theory_for`: the ideal speedup of the k in use and the best k, from α of the
  acceptance events and c, v(n) of the timed forwards — never from the answer's speed.

Pure arithmetic on plain floats: no torch, so the TUI can import it (and the `Costs` and
`SamplingParams` it holds from here). Knows nothing about models or widgets.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from specchat.chat.events import StatsSnapshot
from specchat.engine.costs import Costs, least_squares
from specchat.engine.params import SamplingParams
from specchat.engine.theory import best_k, measured_speedup, speedup_at

__all__ = ["Baseline", "Costs", "SamplingParams", "Theory", "decode_span", "gauge_speedup",
           "merged", "theory_for", "too_short"]


@dataclass(frozen=True)
class Baseline:
    """Target-only costs of one pair on this machine, for one sampling setting."""

    sampling: SamplingParams
    """Target-only speed is measured per sampling setting."""
    step_points: tuple[tuple[int, float], ...]
    """(context length, seconds per target-only token) of the real decoding loop."""
    costs: Costs | None = None
    """Verify costs of each width, measured at `verify_context`, and the draft's step
    (`draft_step_s` None: no drafter)."""
    verify_context: int = 0
    measured_at: float = 0.0
    """time.time() when the measurement finished."""
    measure_s: float = 0.0
    """How long the measurement took."""
    forward_points: tuple[tuple[int, float], ...] = ()
    """(context length, seconds of the target's forward in a one-token decoding round, as
    the engine times it: `Round.verify_s`), measured with the step points."""
    min_decode_s: float = 1.0
    """Decoding time below which an answer's speedup against this baseline means nothing
    (`too_short`); scripted services, whose timings carry no noise, set 0."""
    passes: int = 1
    """Measurements merged into this baseline (`merged`)."""
    settled_passes: int = 3
    """Passes after which it stops being refined when idle; scripted services set 1."""

    @property
    def settled(self) -> bool:
        return self.passes >= self.settled_passes

    @property
    def max_context(self) -> int:
        return max(length for length, _ in self.step_points)

    def step_s(self, context: float) -> float:
        """Seconds of one target-only token at this context length (least-squares line)."""
        intercept, slope = _line(self.step_points)
        return max(intercept + slope * context, 1e-9)

    def plain_seconds(self, start: int, end: int) -> float:
        """Target-only time for the tokens at context lengths start..end-1 (a line sums exactly)."""
        count = max(0, end - start)
        return count * self.step_s((start + end - 1) / 2) if count else 0.0

    def tokens_per_s(self, context: float) -> float:
        return 1.0 / self.step_s(context)

    @property
    def draft_step_s(self) -> float | None:
        return None if self.costs is None else self.costs.draft_step_s

    def v(self, width: int) -> float:
        """Verify cost of `width` tokens relative to a one-token forward (`Costs.v`); only
        where the costs were timed (`c` is not None)."""
        if self.costs is None:
            raise ValueError("this baseline timed no verify costs")
        return self.costs.v(width)

    @property
    def c(self) -> float | None:
        """Draft step cost relative to the target's one-token forward (`Costs.c`)."""
        return None if self.costs is None else self.costs.c

    def idle_forward_s(self, width: int, contexts: float, rounds: int) -> float | None:
        """Idle seconds of `rounds` target forwards of `width` tokens whose context lengths
        sum to `contexts` (a line sums exactly); None where not measured."""
        if not self.forward_points or (width > 1 and self.costs is None):
            return None
        intercept, slope = _line(self.forward_points)
        return (rounds * intercept + slope * contexts) * (self.v(width) if width > 1 else 1.0)

    def load_factor(self, stats: StatsSnapshot | None) -> float | None:
        """The answer's decode rounds' seconds (drafting and target forwards) over the same
        work's idle seconds (1.0: it ran as fast as measured idle); None before any decode
        round. Drafting with no measured draft step (n-gram lookup) counts as it ran."""
        if stats is None:
            return None
        drafted, draft_s = stats.decode_drafting
        live = draft_s
        idle = draft_s if self.draft_step_s is None else drafted * self.draft_step_s
        for width, rounds, contexts, seconds in stats.target_forwards:
            expected = self.idle_forward_s(width, contexts, rounds)
            if expected is None:
                return None
            live, idle = live + seconds, idle + expected
        return live / idle if idle > 0 and stats.target_forwards else None

    def no_k_pays(self) -> bool:
        """Whether the timed costs rule speculation out: no k that k = "auto" tries beats a
        plain step even if every draft were accepted (k = "auto" then never drafts)."""
        if self.c is None:
            return False
        return best_k(1.0, self.c, self.v)[0] == 0


def merged(older: Baseline, newer: Baseline) -> Baseline:
    """Two measurements of the same costs as one: every pass's step and forward points kept
    (the line goes through each context's median, so one slow pass at a context does not
    move it), verify and draft costs averaged over the passes; dated by the newer.

    One pass on a shared machine can be off by a fifth at every context at once (a run
    whose gauges all read 0.8 of their races); the chat merges passes while it is idle."""
    total = older.passes + newer.passes

    def pooled(old: float | None, new: float | None) -> float | None:
        """The passes' mean where both timed it, else whichever did."""
        if old is None or new is None:
            return new if old is None else old
        return (old * older.passes + new * newer.passes) / total

    def pooled_seconds(old: float | None, new: float | None) -> float:
        """`pooled` of a verify width, which one pass at least timed."""
        seconds = pooled(old, new)
        assert seconds is not None, "a width comes from one of the passes"
        return seconds

    costs = None
    if older.costs is not None or newer.costs is not None:
        old_verify = older.costs.verify_s if older.costs is not None else {}
        new_verify = newer.costs.verify_s if newer.costs is not None else {}
        verify = {n: pooled_seconds(old_verify.get(n), new_verify.get(n))
                  for n in sorted(set(old_verify) | set(new_verify))}
        costs = Costs.of(verify, pooled(older.draft_step_s, newer.draft_step_s))
    return replace(newer, step_points=tuple(sorted(older.step_points + newer.step_points)),
                   forward_points=tuple(sorted(older.forward_points + newer.forward_points)),
                   costs=costs, passes=total, measure_s=older.measure_s + newer.measure_s)


def _medians(points: tuple[tuple[int, float], ...]) -> tuple[tuple[int, float], ...]:
    """One point per context length: the median of its measurements."""
    by_length: dict[int, list[float]] = {}
    for length, seconds in points:
        by_length.setdefault(length, []).append(seconds)
    return tuple((length, statistics.median(values)) for length, values in sorted(by_length.items()))


def _line(points: tuple[tuple[int, float], ...]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line (engine/costs.py's) through each context
    length's median; a flat line through one point."""
    return least_squares(_medians(points))


def too_short(stats: StatsSnapshot, baseline: Baseline) -> bool:
    """Whether the answer decoded too briefly for its speedup to mean anything: a few rounds
    timed on a shared machine say nothing (an 8-token answer raced at 1.91x and 1.02x
    minutes apart while its gauge read 0.81x and 1.79x)."""
    return stats.decode_s < baseline.min_decode_s


def decode_span(stats: StatsSnapshot) -> tuple[int, int]:
    """Context lengths of the answer's decode tokens: after the first round, to the end."""
    start = stats.prompt_tokens + stats.first_round_tokens
    return start, stats.prompt_tokens + stats.tokens


def gauge_speedup(stats: StatsSnapshot | None, baseline: Baseline | None) -> float | None:
    """Target-only time for the answer's decode tokens at their context lengths, under the
    load the answer ran under, over the time the answer took for them: the speedup a race
    of the same prompt would measure."""
    if stats is None or baseline is None or not stats.decode_s or stats.decode_tokens < 1:
        return None
    if too_short(stats, baseline):
        return None
    start, end = decode_span(stats)
    load = baseline.load_factor(stats) or 1.0
    plain_s = load * baseline.plain_seconds(start, end)
    if plain_s <= 0:
        return None
    return measured_speedup(stats.decode_tokens / stats.decode_s, stats.decode_tokens / plain_s)


@dataclass(frozen=True)
class Theory:
    """The cost model's prediction for an answer, from independent measurements."""

    alpha: float
    k: int
    c: float
    v: float
    """v(k + 1)."""
    match_rate: float
    ideal: float
    best_k: int
    best: float


def theory_for(stats: StatsSnapshot | None, baseline: Baseline | None) -> Theory | None:
    """Ideal speedup of the k in use and the best k, or None until α and costs are known."""
    if stats is None or baseline is None or stats.alpha is None or not stats.k_in_use:
        return None
    c = baseline.c
    if c is None:
        return None
    k, match = stats.k_in_use, stats.drafting_rounds / stats.rounds if stats.rounds else 1.0
    ideal = speedup_at(stats.alpha, k, c, baseline.v, match)
    chosen, best = best_k(stats.alpha, c, baseline.v, match_rate=match)
    return Theory(stats.alpha, k, c, baseline.v(k + 1), match, ideal, chosen, best)
