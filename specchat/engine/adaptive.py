"""Adaptive draft length (k = "auto"): pick k each round from the running acceptance α
and the measured costs of drafting and verifying.

The expected committed tokens of a round with k drafts are (1 − α^(k+1)) / (1 − α)
(Leviathan et al.); its cost is k draft steps plus one verify of k + 1 tokens. The
policy picks the k with the most tokens per second. Both α and the costs are learned
online from the engine's own `Round` events (the decoder calls `observe` after every
round), with exponential forgetting, so the choice follows the conversation: long k on
text that repeats, k = 1 on open chat.

α is the maximum-likelihood per-token acceptance of a geometric model: accepted drafts
over accepted drafts plus rejections. Each cost is the median of its recent samples:
single timings on a shared machine scatter by a quarter, and a running mean let one slow
plain step switch speculation on where it loses. With a prior (the `Costs` timed before
the answer, engine/costs.py), widths not yet timed often enough cost the prior's figure at
the machine's present level (beyond the prior's widest, its line extended: k goes up to
K_MAX, the prior times fewer widths), so the first rounds already know what a verify of each width
and a draft step cost relative to a plain step: where the prior says no k can pay, the
answer starts plain and the draft is never fed. Without one, a width's cost is its
median where measured and a least-squares line elsewhere. Costs are learned only from
rounds without prefill: a verify that also carried the prompt (`Round.fed` above drafted
+ 1) teaches nothing about verify widths, and the draft's first proposal after such a
round, or after plain rounds, also feeds what its cache lacked, so its step cost is
learned only from a round that follows a drafting round.

k = 0 (plain decoding) is one of the choices: where every k >= 1 is expected to be
slower than a plain step (learned from rounds that fed one token), the policy stops
speculating, and probes with one drafting round after every `probe_every` plain rounds,
an interval that doubles while probes keep being rejected and starts over after a probe
whose drafts were all accepted, so it comes back when acceptance rises. Where the costs
alone rule speculation out (no k would beat a plain step even if every draft were
accepted: a verify of n tokens costing about n plain steps, as llama.cpp's on a small
CPU), acceptance cannot bring it back, so probes only re-check the costs, once in
`CANNOT_PAY_PROBE_EVERY` plain rounds, and not at all when the costs were timed before
the answer (a prior): a probe first feeds the draft everything it lacks, and on
the built-in pair that catch-up cost 3-5% of a plain answer's time. Before the costs are
trusted, a plain round measures the one-token step (otherwise only the widths in use are
measured, and a plain step's cost is a guess from the prior slope). While drafting, one
plain round in `PLAIN_EVERY` measures it afresh (the old estimate is dropped): a plain
step timed on a busy moment would otherwise keep speculation on long after it stopped
paying, since drafting rounds never time a plain step.

Inside a lookup-first drafter (prompt lookup where the answer copies text, a model or a
head elsewhere: engine/drafters.py) the rounds whose drafts the lookup copied are learned
apart (`Round.by_lookup`): their own α, no draft step, and their k the best at that α with
drafting free (`lookup_length`); the decoder asks the drafter which of the two will draft
before it asks for k, and the drafter decides from the committed tokens alone. Copied text
is accepted far more than guesses are, so one α for both would size the model's rounds too
long and the lookup's too short, and the lookup's near-free drafting would pull the model's
draft cost down.

Torch-free bookkeeping; knows nothing about models or text. Every decision uses past
rounds only, never the round it decides (that would bias the output).
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specchat.engine.costs import Costs, fit_line
from specchat.engine.params import K_MAX, SamplingParams
from specchat.engine.theory import expected_tokens_per_round

if TYPE_CHECKING:
    from specchat.engine.decoder import Settings
    from specchat.engine.events import Round

PRIOR_ALPHA = 0.6
PRIOR_WEIGHT = 2.0
PRIOR_VERIFY_SLOPE = 0.08
"""Extra cost of each verified token relative to a one-token step, assumed while one width
alone is timed and no prior is known (docs/design.md §5)."""
PROBE_START = 4
"""Plain rounds before the first probe once speculation stopped paying."""
PROBE_MAX = 64
"""The longest run of plain rounds between two probes."""
CANNOT_PAY_PROBE_EVERY = 256
"""Plain rounds between probes where no k could pay even at full acceptance."""
PLAIN_EVERY = 64
"""Drafting rounds between two plain rounds that measure the one-token step afresh."""


WINDOW = 9
"""Recent samples kept per cost; an estimate is their median (one slow moment on a busy
machine moves a median by one rank, a running mean by a fifth of the outlier)."""
TRUSTED_SAMPLES = 3
"""Samples of a width before its own median replaces the prior's shape."""


@dataclass
class RecentMedian:
    """The median of the last `WINDOW` samples; `None` before the first."""

    samples: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    value: float | None = None
    """The median, kept up to date by `add` (the policy reads it many times a round)."""

    def add(self, sample: float) -> None:
        self.samples.append(sample)
        self.value = statistics.median(self.samples)

    def __len__(self) -> int:
        return len(self.samples)


@dataclass
class CostModel:
    """Seconds per draft token and per verify pass of each width, learned from rounds.

    With a prior (`Costs` timed before the answer: the chat's baseline, or `bench`'s
    and `run`'s own measurement), a width with fewer than `TRUSTED_SAMPLES` samples of its own
    costs the prior's figure scaled by the median ratio of recent live samples to the
    prior (any width): the machine's present speed, the prior's shape. Without one, a
    measured width costs its median and the others a line fitted through them. The prior's
    shape (how verify cost grows with width, what a draft step costs beside a target
    step) holds on a machine; the live rounds set the level."""

    prior: Costs | None = None
    draft_step: RecentMedian = field(default_factory=RecentMedian)
    verify: dict[int, RecentMedian] = field(default_factory=dict)
    _scale: RecentMedian = field(default_factory=RecentMedian)
    _draft_scale: RecentMedian = field(default_factory=RecentMedian)

    def observe(self, drafted: int, draft_s: float, verify_s: float,
                learn_verify: bool = True, learn_draft: bool = True) -> None:
        """Learn from one round; `learn_*` False skips a time that carried a prefill."""
        prior = self.prior
        if drafted and learn_draft:
            self.draft_step.add(draft_s / drafted)
            if prior is not None and prior.draft_step_s:
                self._draft_scale.add(draft_s / drafted / prior.draft_step_s)
        if learn_verify:
            width = drafted + 1
            self.verify.setdefault(width, RecentMedian()).add(verify_s)
            if prior is not None and prior.verify_s.get(width):
                self._scale.add(verify_s / prior.verify_s[width])

    def verify_cost(self, width: int) -> float | None:
        """Seconds to verify `width` tokens: measured, else from the prior, else fitted, else None."""
        own = self.verify.get(width)
        trusted = TRUSTED_SAMPLES if self.prior is not None else 1
        if own is not None and len(own) >= trusted:
            return own.value
        if self.prior is not None:  # timed before the answer, or extended beyond its widths
            return self.prior.verify_seconds(width) * (self._scale.value or 1.0)
        known = {w: m.value for w, m in self.verify.items() if m.value is not None}
        if width in known:
            return known[width]
        if not known:
            return None
        if len(known) == 1:
            (w0, v0), = known.items()
            return v0 * (1 + PRIOR_VERIFY_SLOPE * (width - 1)) / (1 + PRIOR_VERIFY_SLOPE * (w0 - 1))
        return max(fit_line(known)(width), 1e-9)

    def draft_cost(self) -> float:
        """Seconds per draft token (0 before any is known: drafting looks free until timed)."""
        prior = self.prior
        if prior is None or not prior.draft_step_s or len(self.draft_step) >= TRUSTED_SAMPLES:
            return self.draft_step.value or 0.0
        scale = self._draft_scale.value or self._scale.value or 1.0
        return prior.draft_step_s * scale

    def forget(self, width: int) -> None:
        """Drop what was learned about verifying `width` tokens (the next round re-measures it)."""
        self.verify.pop(width, None)

    def measured_widths(self) -> set[int]:
        """Widths with a cost of their own or the prior's."""
        own = {w for w, m in self.verify.items() if m.value is not None}
        return own | (set(self.prior.verify_s) if self.prior is not None else set())

    def round_cost(self, k: int) -> float | None:
        verify = self.verify_cost(k + 1)
        if verify is None:
            return None
        return k * self.draft_cost() + verify


@dataclass
class AcceptanceEstimate:
    """Running per-token acceptance α from accepted drafts and rejections."""

    decay: float = 0.9
    """Forgetting per drafting round: about seven rounds of half-life."""
    accepted: float = PRIOR_ALPHA * PRIOR_WEIGHT
    rejections: float = (1 - PRIOR_ALPHA) * PRIOR_WEIGHT

    def observe(self, drafted: int, accepted: int) -> None:
        if not drafted:
            return
        self.accepted = self.decay * self.accepted + accepted
        self.rejections = self.decay * self.rejections + (1 if accepted < drafted else 0)

    @property
    def alpha(self) -> float:
        return self.accepted / (self.accepted + self.rejections)


class AdaptiveK:
    """The engine's `Settings.k_policy` for k = "auto": call it for k, feed it rounds."""

    def __init__(self, k_max: int = K_MAX, k_start: int = 4, k_min: int = 0,
                 prior: Costs | None = None):
        self.k_min, self.k_max, self.k_start = k_min, k_max, k_start
        self.costs = CostModel(prior)
        self.acceptance = AcceptanceEstimate()
        self.lookup_acceptance = AcceptanceEstimate()
        """α of the rounds prompt lookup drafted inside a lookup-first drafter (`Round.by_lookup`):
        copied text is accepted far more than the model's guesses, and costs nothing to draft."""
        self.history: list[int] = []
        self.probe_every = PROBE_START
        """Plain rounds between probes while speculation does not pay."""
        self._plain_run = 0
        self._probing = False
        self._drafted_last = False
        self._drafting_run = 0

    def use_prior(self, prior: Costs) -> None:
        """Start from step costs timed before the answer (see `CostModel`)."""
        self.costs.prior = prior

    @property
    def has_prior(self) -> bool:
        return self.costs.prior is not None

    def __call__(self) -> int:
        k = self.choose()
        self.history.append(k)
        return k

    def choose(self) -> int:
        rates = self.rates()
        if rates is None:
            return self.k_start
        if self.k_min == 0 and 1 not in self.costs.measured_widths():
            return 0  # measure a plain step before comparing with it
        best = max(rates, key=lambda k: rates[k])
        if best > 0 and self.k_min == 0 and self._drafting_run >= PLAIN_EVERY:
            return 0  # measure afresh the plain step that speculation is compared with
        every = self._probe_interval()
        self._probing = best == 0 and every is not None and self._plain_run >= every
        if best > 0:
            self.probe_every = PROBE_START
        elif self._probing:
            return max((k for k in rates if k > 0), key=lambda k: rates[k], default=0)
        return best

    def _probe_interval(self) -> int | None:
        """Plain rounds before the next probe; None for no probe at all. Where timed costs
        rule speculation out, a probe could only re-check them, and would first feed the
        draft everything it lacks (the whole conversation): more than it could find."""
        if self.can_pay():
            return self.probe_every
        return None if self.costs.prior is not None else CANNOT_PAY_PROBE_EVERY

    def lookup_length(self) -> int:
        """k for a round whose drafts prompt lookup copies: the best k at the lookup's own α
        with drafting free (the verify costs are the same target's); k_start before any
        verify cost is known."""
        rates = self.rates(self.lookup_acceptance.alpha, free_drafts=True)
        k = self.k_start if rates is None else max(rates, key=lambda k: rates[k])
        self.history.append(k)
        return k

    def rates(self, alpha: float | None = None,
              free_drafts: bool = False) -> dict[int, float] | None:
        """Expected tokens per second for each k (at the model's α unless given; `free_drafts`:
        drafting costs nothing), or None before any cost is known."""
        alpha = self.acceptance.alpha if alpha is None else alpha
        out = {}
        for k in range(self.k_min, self.k_max + 1):
            cost = self.costs.verify_cost(k + 1) if free_drafts else self.costs.round_cost(k)
            if cost is None:
                return None
            out[k] = expected_tokens_per_round(alpha, k) / cost
        return out

    def can_pay(self) -> bool:
        """Whether some k >= 1 would beat a plain step if every draft were accepted (True
        until verify costs are known at two widths, timed live or by the prior: the slope
        assumed without either is no evidence). Only draft lengths whose verify was timed
        count: a verify extended beyond the timed widths is a guess, and on llama.cpp's
        stepped v(n) the line through the widest few can make k = 16 look 1% cheaper than
        17 plain steps, which set probes going whose catch-up cost a fifth of the answer."""
        timed = self.costs.measured_widths()
        if len(timed) < 2:
            return True
        plain = self.costs.round_cost(0)
        costs = {k: self.costs.round_cost(k) for k in range(max(1, self.k_min), self.k_max + 1)
                 if k + 1 in timed}
        return plain is None or any(cost is None or (k + 1) * plain > cost
                                    for k, cost in costs.items())

    def observe(self, event: Round) -> None:
        """Learn from a `Round`: its acceptance and its draft and verify times."""
        prefill = event.fed > event.drafted + 1
        if not event.drafted and self._drafting_run >= PLAIN_EVERY:
            self.costs.forget(1)
        # a lookup round's drafting time is no draft step's, and its acceptance is its own
        self.costs.observe(event.drafted, event.draft_s, event.verify_s, learn_verify=not prefill,
                           learn_draft=not prefill and self._drafted_last and not event.by_lookup)
        acceptance = self.lookup_acceptance if event.by_lookup else self.acceptance
        acceptance.observe(event.drafted, len(event.accepted))
        self._drafted_last = event.drafted > 0 and not event.by_lookup
        self._plain_run = 0 if event.drafted else self._plain_run + 1
        self._drafting_run = self._drafting_run + 1 if event.drafted else 0
        if self._probing and event.drafted:
            full = len(event.accepted) == event.drafted
            self.probe_every = PROBE_START if full else min(2 * self.probe_every, PROBE_MAX)
            self._probing = False


def settings_for(k: int | str, sampling: SamplingParams, k_max: int = K_MAX,
                 prior: Costs | None = None) -> Settings:
    """Engine `Settings` for a configured k: an int, or "auto" for an `AdaptiveK` policy
    (starting from `prior` when the step costs were timed before)."""
    from specchat.engine.decoder import Settings

    if k == "auto":
        policy = AdaptiveK(k_max=k_max, prior=prior)
        return Settings(policy.k_start, sampling, policy)
    return Settings(int(k), sampling)
