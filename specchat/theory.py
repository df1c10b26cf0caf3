"""Speculative decoding theory (Leviathan et al., 2023): expected tokens per round,
ideal speedup, and the per-token acceptance α inferred from a measured τ.

Pure arithmetic on floats, standard library only, so that both the engine's
statistics and the torch-free TUI can use it. Knows nothing about models.
"""

from __future__ import annotations


def expected_tokens_per_round(alpha: float, k: int) -> float:
    """(1 − α^(k+1)) / (1 − α): expected committed tokens per round (Leviathan et al.)."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def ideal_speedup(alpha: float, k: int, cost_ratio: float, verify_cost: float = 1.0) -> float:
    """Expected tokens per round over its cost (k·c + v), in plain-decoding steps."""
    return expected_tokens_per_round(alpha, k) / (k * cost_ratio + verify_cost)


def alpha_from_tau(tau: float, k: int, tolerance: float = 1e-6) -> float:
    """Invert τ = (1 − α^(k+1)) / (1 − α) for α by bisection (τ is increasing in α)."""
    if k <= 0:
        return 0.0
    low, high = 0.0, 1.0
    tau = min(max(tau, 1.0), k + 1.0)
    while high - low > tolerance:
        mid = (low + high) / 2
        if expected_tokens_per_round(mid, k) < tau:
            low = mid
        else:
            high = mid
    return (low + high) / 2
