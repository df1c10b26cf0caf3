"""The theory's speedup (engine/theory.py) against numbers worked by hand from the formula in
Leviathan et al. (2023): a round drafts k tokens at c plain steps each, verifies k + 1 at
v plain steps, and commits (1 − α^(k+1)) / (1 − α) tokens on average; the ideal speedup is
that over k·c + v. Each expected value below is the arithmetic in its comment, not the code's
own function run backwards."""

from __future__ import annotations

import pytest

from specchat.engine.theory import best_k, expected_tokens_per_round, ideal_speedup, speedup_at


def test_ideal_speedup_at_alpha_0_8_k_4_is_1_77():
    # tokens: (1 − 0.8^5) / (1 − 0.8) = (1 − 0.32768) / 0.2 = 3.3616
    # cost:   4 × 0.1 + 1.5 = 1.9 plain steps;  3.3616 / 1.9 = 1.76926…
    assert expected_tokens_per_round(0.8, 4) == pytest.approx(3.3616)
    assert ideal_speedup(0.8, 4, 0.1, 1.5) == pytest.approx(1.769263, abs=1e-6)


def test_ideal_speedup_at_the_ends_of_alpha_and_at_break_even():
    # α = 0: only the target's own token, 1 / (3 × 0.2 + 1.2) = 1 / 1.8 = 0.5556
    assert ideal_speedup(0.0, 3, 0.2, 1.2) == pytest.approx(0.555556, abs=1e-6)
    # α = 1: all k drafts and the bonus, 4 / (3 × 0.25 + 1.25) = 4 / 2 = 2
    assert ideal_speedup(1.0, 3, 0.25, 1.25) == pytest.approx(2.0)
    # α = 0.5, k = 1: (1 − 0.25) / 0.5 = 1.5 tokens for 0.5 + 1 = 1.5 steps: exactly 1
    assert ideal_speedup(0.5, 1, 0.5, 1.0) == pytest.approx(1.0)


def test_ideal_speedup_with_a_lookup_that_matches_half_the_rounds_is_1_375():
    # matched rounds: (1 − 0.5^3) / 0.5 = 1.75 tokens for 0 + 1 step; the other half: a plain
    # step, one token. (0.5 × 1.75 + 0.5 × 1) / (0.5 × 1 + 0.5 × 1) = 1.375
    assert ideal_speedup(0.5, 2, 0.0, 1.0, match_rate=0.5) == pytest.approx(1.375)


def test_the_best_k_on_a_verify_curve_is_worked_out_k_by_k():
    def v(n: int) -> float:
        return 1 + 0.1 * (n - 1)  # each token past the first adds a tenth of a step

    # α 0.6, c 0.2: k=1: 1.6 / 1.3 = 1.2308; k=2: 1.96 / 1.6 = 1.225;
    # k=3: 2.176 / 1.9 = 1.1453; k=4: 2.3056 / 2.2 = 1.048; k=0: 1 / v(1) = 1
    assert speedup_at(0.6, 2, 0.2, v) == pytest.approx(1.225)
    assert speedup_at(0.6, 3, 0.2, v) == pytest.approx(1.145263, abs=1e-6)
    k, best = best_k(0.6, 0.2, v, k_max=4)
    assert k == 1 and best == pytest.approx(16 / 13)
