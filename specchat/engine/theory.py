"""Speculative decoding theory (Leviathan et al., 2023): expected tokens per round,
the ideal speedup of a draft length k at measured costs, the best k, the acceptance
α a draft needs to pay off, and α estimated from acceptance events; and the measured
speedup the theory is checked against (one rate over another of the same run).

Every input is measured on its own: α from which draft positions were accepted
(never solved back out of a measured τ or speed), c and v(n) from timed forwards.
The one owner of these formulas: the engine's statistics and adaptive k, the chat's
gauges and race verdict, `bench` and `pairs --check` call them and derive none.
Pure arithmetic on floats, standard library only (importing it never imports torch:
specchat/engine/__init__ is lazy), so the torch-free TUI path uses it too. Knows
nothing about models.
"""

from __future__ import annotations

from typing import Callable, Sequence

from specchat.engine.params import K_MAX

VerifyCost = Callable[[int], float]
"""v(n): seconds of one target forward over n tokens, relative to one plain decoding step."""


def expected_tokens_per_round(alpha: float, k: int) -> float:
    """(1 − α^(k+1)) / (1 − α): expected committed tokens per round (Leviathan et al.)."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def ideal_speedup(alpha: float, k: int, cost_ratio: float, verify_cost: float = 1.0,
                  match_rate: float = 1.0, plain_cost: float = 1.0) -> float:
    """Expected tokens per round over its cost, in plain-decoding steps.

    A round drafts k tokens (cost k·c) and verifies k + 1 (cost v). With a match rate
    m < 1 (n-gram lookup that sometimes finds nothing) the other rounds are plain
    steps costing `plain_cost` (v(1)) and committing one token.
    """
    tokens = match_rate * expected_tokens_per_round(alpha, k) + (1 - match_rate)
    cost = match_rate * (k * cost_ratio + verify_cost) + (1 - match_rate) * plain_cost
    return tokens / cost


def speedup_at(alpha: float, k: int, c: float, v: VerifyCost, match_rate: float = 1.0) -> float:
    """`ideal_speedup` with the verify cost taken from a v(n) curve (k = 0 is plain decoding)."""
    if k == 0:
        return 1.0 / v(1)
    return ideal_speedup(alpha, k, c, v(k + 1), match_rate, v(1))


def best_k(alpha: float, c: float, v: VerifyCost, k_max: int = K_MAX,
           match_rate: float = 1.0) -> tuple[int, float]:
    """The k in 0..k_max with the highest ideal speedup, and that speedup (k = 0: don't draft)."""
    return max(((k, speedup_at(alpha, k, c, v, match_rate)) for k in range(k_max + 1)),
               key=lambda pair: pair[1])


def break_even_alpha(k: int, c: float, v: VerifyCost, tolerance: float = 1e-6) -> float | None:
    """The α at which drafting k tokens a round starts to beat plain decoding: 0 when even
    α = 0 pays (the round costs no more than one plain step), None if no α below 1 does (it
    costs as much as k + 1 plain steps)."""
    if speedup_at(1.0, k, c, v) <= 1.0 / v(1):
        return None
    if speedup_at(0.0, k, c, v) >= 1.0 / v(1):
        return 0.0
    low, high = 0.0, 1.0
    while high - low > tolerance:
        mid = (low + high) / 2
        if speedup_at(mid, k, c, v) < 1.0 / v(1):
            low = mid
        else:
            high = mid
    return (low + high) / 2


def break_even_verify_cost(alpha: float, k: int, c: float, plain_cost: float = 1.0) -> float:
    """The dearest verify of k + 1 tokens (in plain steps) at which drafting k a round still
    pays at acceptance α and draft cost c: a round's expected tokens, each worth a plain step,
    less its drafting (`ideal_speedup` = 1/v(1) solved for the verify cost)."""
    return expected_tokens_per_round(alpha, k) * plain_cost - k * c


def cheapest_break_even(c: float, v: VerifyCost, k_max: int = K_MAX) -> tuple[int, float] | None:
    """(k, α): the draft length in 1..k_max that starts to pay at the lowest acceptance, and
    that acceptance; None where no k pays even if every draft were accepted."""
    evens = [(alpha, k) for k in range(1, k_max + 1)
             if (alpha := break_even_alpha(k, c, v)) is not None]
    if not evens:
        return None
    alpha, k = min(evens)
    return k, alpha


def acceptance_alpha(accepted: Sequence[int], tried: Sequence[int]) -> float | None:
    """Per-token acceptance α from acceptance events, pooled over draft positions.

    `tried[i]` counts rounds in which draft i was actually put to the test (it was
    drafted and every draft before it was accepted); `accepted[i]` those that kept it.
    Rounds that drafted nothing, and positions a round did not draft (budget clipped,
    an n-gram with a short continuation), are no trials, so they cannot drag α down.
    """
    trials = sum(tried)
    return sum(accepted) / trials if trials else None


def measured_speedup(tokens_per_s: float | None, reference_tokens_per_s: float | None) -> float | None:
    """A measured speedup: one arm's tokens/s over the reference's (target-only), both
    measured in the same run on the same prompts; None where either rate is unknown or 0."""
    if not tokens_per_s or not reference_tokens_per_s:
        return None
    return tokens_per_s / reference_tokens_per_s
