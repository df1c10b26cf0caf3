"""The harness of the lossless suite: run the real `Decoder` many times on toy models
over a 4-token vocabulary, then test the committed tokens against the target's exact
distribution with χ² goodness-of-fit tests, and return one verdict (a p-value).

The target is a `TableModel` of order one (its logits depend on the last token only),
so the exact probability of every next token given the history is a table of four
rows, worked out here in plain Python (`reference_probs`), independently of
specchat.engine.sampling. Speculative sampling promises that every committed token,
given everything before it, is distributed as the target's processed p. So the
tokens are counted per stratum and compared with p:

- per draft position: a token's index inside its round (0 = the first draft or the
  plain token, ..., k = the bonus), conditional on the previous token;
- per answer position, conditional on the previous token;
- joint: all (index in round, previous token) strata at once (the sequence's law
  factorises into these conditionals), and the joint distribution of each
  answer's first three tokens (64 cells, one sample per answer).

Whether a token exists at a stratum is decided before it is drawn (by the round's
start and the acceptance of the drafts before it), so every conditional test is
exact. Cells expected below five are merged within their stratum only. The verdict
is the smallest p-value times the number of tests (Bonferroni).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable

import torch
from scipy.stats import chi2

from specchat.engine import Decoder, Finished, Round, SamplingParams, Settings, SpecStats
from toy import TableModel

VOCAB = 4
PROMPT = [1, 2, 3, 0, 1]
"""Holds every token, so an n-gram lookup of one token always finds a match."""
END = -1
"""Marks the positions after an EOS in the first-three joint."""


def order_one(model: TableModel) -> TableModel:
    """The model with its second table zeroed: its logits depend on the last token only."""
    model.t2.zero_()
    return model


def reference_probs(logits: list[float], params: SamplingParams) -> list[float]:
    """Temperature, then top-k, then top-p (smallest set reaching p), in plain Python."""
    order = sorted(range(len(logits)), key=lambda i: -logits[i])
    if params.temperature <= 0:
        return [1.0 if i == order[0] else 0.0 for i in range(len(logits))]
    kept = order[: params.top_k] if params.top_k > 0 else order
    weights = {i: math.exp((logits[i] - logits[order[0]]) / params.temperature) for i in kept}
    total, mass, nucleus = sum(weights.values()), 0.0, []
    for i in kept:
        nucleus.append(i)
        mass += weights[i] / total
        if mass >= params.top_p:
            break
    norm = sum(weights[i] for i in nucleus)
    return [weights[i] / norm if i in nucleus else 0.0 for i in range(len(logits))]


def exact_table(target: TableModel, params: SamplingParams) -> list[list[float]]:
    """p(next | last token) for every last token."""
    return [reference_probs(target.logits_after([last]).tolist(), params) for last in range(VOCAB)]


@dataclass
class Sample:
    """What many answers committed, counted by stratum."""

    by_round_index: dict = field(default_factory=lambda: defaultdict(Counter))
    """(index in round, previous token) -> Counter of tokens."""
    by_answer_position: dict = field(default_factory=lambda: defaultdict(Counter))
    firsts: Counter = field(default_factory=Counter)
    stats: SpecStats = field(default_factory=SpecStats)
    answers: int = 0
    reasons: Counter = field(default_factory=Counter)
    ks: Counter = field(default_factory=Counter)
    """Rounds by the k they asked for."""
    eos_in_draft: int = 0
    """Rounds ended by an accepted EOS draft (no target token after it)."""


class Harness:
    """Runs answers of `length` tokens from PROMPT until `rounds` rounds are done."""

    def __init__(self, decoder: Decoder, settings: Settings, length: int = 8, seed: int = 0,
                 stop_after: Callable[[int], int] | None = None):
        self.decoder, self.settings, self.length = decoder, settings, length
        self.generator = torch.Generator().manual_seed(seed)
        self.stop_after = stop_after
        """answer number -> how many `should_stop` calls before it says stop (None: never)."""
        self.sequence: list[int] = []
        """The answer so far, prompt included: what a peeking test policy may look at."""

    def run(self, rounds: int) -> Sample:
        sample = Sample()
        while sample.stats.rounds < rounds:
            self._answer(sample)
        return sample

    def _answer(self, sample: Sample) -> None:
        self.sequence = list(PROMPT)
        answer: list[int] = []
        for event in self.decoder.generate(list(PROMPT), self.settings, self.length,
                                           self.generator, self._should_stop(sample.answers)):
            if isinstance(event, Finished):
                sample.reasons[event.stop_reason] += 1
                break
            record_round(sample, event, self.sequence, answer, self.decoder.eos_ids)
        sample.answers += 1
        sample.firsts[tuple((answer + [END] * 3)[:3])] += 1

    def _should_stop(self, number: int):
        if self.stop_after is None:
            return lambda: False
        calls, limit = [0], self.stop_after(number)

        def should_stop() -> bool:
            calls[0] += 1
            return calls[0] > limit

        return should_stop


def record_round(sample: Sample, event: Round, sequence: list[int], answer: list[int],
                 eos_ids: set[int]) -> None:
    sample.stats.update(event)
    sample.ks[event.k] += 1
    sample.eos_in_draft += event.token is None
    for index, token in enumerate(event.committed):
        assert not answer or answer[-1] not in eos_ids, "a token was committed after an EOS"
        sample.by_round_index[(index, sequence[-1])][token] += 1
        sample.by_answer_position[(len(answer), sequence[-1])][token] += 1
        sequence.append(token)
        answer.append(token)


# --- the tests -------------------------------------------------------------------------

def stratum_chi2(counts: Counter, probs: list[float]) -> tuple[float, int]:
    """(χ², degrees of freedom) of one stratum. Cells expected below 5 are merged into
    one (itself merged into the smallest other cell if still below 5). A token the
    target can never produce makes χ² infinite."""
    n = sum(counts.values())
    if any(counts[x] for x, p in enumerate(probs) if p == 0.0):
        return math.inf, 1
    cells = [(n * p, counts[x]) for x, p in enumerate(probs) if p > 0]
    merged = [[e, o] for e, o in cells if e >= 5]
    small = [sum(e for e, _ in cells if e < 5), sum(o for e, o in cells if e < 5)]
    if small[0] >= 5 or (small[0] > 0 and not merged):
        merged.append(small)
    elif small[0] > 0:
        smallest = min(merged)
        smallest[0], smallest[1] = smallest[0] + small[0], smallest[1] + small[1]
    stat = sum((o - e) ** 2 / e for e, o in merged)
    return stat, len(merged) - 1


def conditional_pvalue(strata: dict, table: list[list[float]], keep=lambda key: True) -> float:
    """One χ² test over the strata whose key passes `keep`; key[-1] is the previous token."""
    stat, df = 0.0, 0
    for key, counts in strata.items():
        if keep(key):
            s, d = stratum_chi2(counts, table[key[-1]])
            stat, df = stat + s, df + d
    if math.isinf(stat):
        return 0.0
    return 1.0 if df == 0 else float(chi2.sf(stat, df))


def first_three_probs(table: list[list[float]], eos_ids: set[int]) -> dict[tuple, float]:
    """Exact law of an answer's first three tokens (END after an EOS); impossible
    sequences are left out."""
    probs: dict[tuple, float] = {}

    def walk(prefix: list[int], last: int, p: float) -> None:
        if len(prefix) == 3 or (prefix and prefix[-1] in eos_ids):
            probs[tuple(prefix + [END] * (3 - len(prefix)))] = p
            return
        for token, q in enumerate(table[last]):
            if q > 0:
                walk(prefix + [token], token, p * q)

    walk([], PROMPT[-1], 1.0)
    return probs


def joint_pvalue(firsts: Counter, probs: dict[tuple, float]) -> float:
    keys = list(probs)
    stat, df = stratum_chi2(Counter({i: firsts[k] for i, k in enumerate(keys)}),
                            [probs[k] for k in keys])
    unknown = sum(n for k, n in firsts.items() if k not in probs)
    if unknown or math.isinf(stat):
        return 0.0
    return 1.0 if df == 0 else float(chi2.sf(stat, df))


@dataclass
class Verdict:
    pvalues: dict[str, float]

    @property
    def pvalue(self) -> float:
        """Bonferroni: the smallest p-value times the number of tests."""
        return min(1.0, min(self.pvalues.values()) * len(self.pvalues))

    def __str__(self) -> str:
        worst = sorted(self.pvalues.items(), key=lambda kv: kv[1])[:3]
        return f"p = {self.pvalue:.3g} (worst: " + ", ".join(f"{k} {v:.3g}" for k, v in worst) + ")"


def verdict(sample: Sample, table: list[list[float]], eos_ids: set[int] = frozenset(),
            with_joint_firsts: bool = True) -> Verdict:
    pvalues = {"joint (index in round, previous token)": conditional_pvalue(sample.by_round_index, table)}
    for index in sorted({key[0] for key in sample.by_round_index}):
        pvalues[f"round index {index}"] = conditional_pvalue(
            sample.by_round_index, table, lambda key, i=index: key[0] == i)
    for position in sorted({key[0] for key in sample.by_answer_position}):
        pvalues[f"answer position {position}"] = conditional_pvalue(
            sample.by_answer_position, table, lambda key, j=position: key[0] == j)
    if with_joint_firsts:
        pvalues["joint of the first three tokens"] = joint_pvalue(
            sample.firsts, first_three_probs(table, eos_ids))
    return Verdict(pvalues)


def chi2_pvalue(counts: dict, probs: dict, runs: int | None = None) -> float:
    """χ² of observed outcomes against exact probabilities (for other suites' joints):
    cells expected below 5 merged, an outcome the law excludes rejects at once."""
    return joint_pvalue(Counter(counts), probs)
