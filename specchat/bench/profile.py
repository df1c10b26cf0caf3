"""The cost model behind a pair's speedup, measured: the draft/target step cost
ratio c, the verify cost v(n) of n tokens relative to one plain step, the
acceptance α inferred from measured τ, and the ideal speedup of each k
(DESIGN.md §4) next to the one measured in the same run.

For a drafter that does not always draft (n-gram lookup without a match) the
ideal speedup weighs drafting rounds by the measured match rate m:
tokens/round = m·E(α, k) + (1 − m), cost/round = m·(k·c + v(k+1)) + (1 − m)·v(1).
Works on any engine `CausalModel`; knows nothing about transformers.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch

from specchat.engine import ModelDrafter, SamplingParams
from specchat.engine.stats import alpha_from_tau, expected_tokens_per_round

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


def verify_costs(model, context: list[int], widths=WIDTHS, repeats: int = 5) -> dict[int, float]:
    """Median seconds of one forward of n tokens after `context`, cache rolled back each time."""
    model.reset()
    model.forward(torch.tensor(context, device=model.device))
    base = model.cache_length
    ids = torch.tensor((context * (max(widths) // len(context) + 1))[: max(widths)],
                       device=model.device)

    def one(width: int):
        model.forward(ids[:width], keep=width)
        model.crop(base)

    one(max(widths))  # warm-up (and, on CUDA, graph capture) outside the timings
    return {w: median_seconds(lambda w=w: one(w), repeats, model.device) for w in widths}


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


def measure_costs(pair, context: list[int], repeats: int = 5) -> Costs:
    verify = verify_costs(pair.target, context, repeats=repeats)
    return Costs(verify[1], draft_step_cost(pair.drafter, context, repeats), verify)


def run_acceptance(runs) -> tuple[float | None, float]:
    """(τ over rounds that drafted all k tokens, match rate m) of some answers of one arm.

    Rounds with fewer drafts (end of the budget, an EOS, a short n-gram continuation)
    would bias α low if counted with the nominal k.
    """
    rounds = sum(r.rounds for r in runs)
    full = sum(r.full_rounds for r in runs)
    match = sum(r.drafting_rounds for r in runs) / rounds if rounds else 0.0
    if not full:
        return None, match
    return sum(r.full_tokens for r in runs) / full, match


def ideal_speedup(alpha: float, k: int, costs: Costs, match_rate: float = 1.0) -> float:
    tokens = match_rate * expected_tokens_per_round(alpha, k) + (1 - match_rate)
    cost = match_rate * (k * costs.c + costs.v(k + 1)) + (1 - match_rate) * costs.v(1)
    return tokens / cost


def profile_rows(results, ks, costs: Costs) -> list[dict]:
    """Per k: τ, α = alpha_from_tau(τ, k), match rate, ideal and measured speedup."""
    target_rate = rate([r.runs["target"] for r in results])
    rows = []
    for k in ks:
        runs = [r.runs[f"k{k}"] for r in results]
        tau, match = run_acceptance(runs)
        alpha = alpha_from_tau(tau, k) if tau else 0.0
        rows.append({"k": k, "tau": tau, "alpha": alpha, "match_rate": match,
                     "ideal_speedup": ideal_speedup(alpha, k, costs, match),
                     "measured_speedup": rate(runs) / target_rate if target_rate else None})
    pooled = pooled_alpha(rows)
    for row in rows:
        row["ideal_speedup_pooled_alpha"] = ideal_speedup(pooled, row["k"], costs, row["match_rate"])
    return rows


def pooled_alpha(rows: list[dict]) -> float:
    weights = [r["match_rate"] for r in rows]
    if not sum(weights):
        return 0.0
    return sum(r["alpha"] * w for r, w in zip(rows, weights)) / sum(weights)


def rate(runs) -> float:
    seconds = sum(r.seconds for r in runs)
    return sum(len(r.tokens) for r in runs) / seconds if seconds else 0.0


def profile_report(results, ks, costs: Costs) -> dict:
    rows = profile_rows(results, ks, costs)
    measured = [r for r in rows if r["measured_speedup"] is not None]
    return {"target_step_ms": costs.target_step_s * 1000, "draft_step_ms": costs.draft_step_s * 1000,
            "c": costs.c, "verify_ms": {w: s * 1000 for w, s in costs.verify_s.items()},
            "v": {w: costs.v(w) for w in costs.verify_s}, "pooled_alpha": pooled_alpha(rows),
            "rows": rows,
            "best_k_ideal": max(rows, key=lambda r: r["ideal_speedup_pooled_alpha"])["k"],
            "best_k_measured": max(measured, key=lambda r: r["measured_speedup"])["k"]
            if measured else None}


def format_profile(profile: dict) -> str:
    from specchat.bench.format import fmt, table

    widths = sorted(profile["verify_ms"], key=int)  # keys are strings after a JSON round trip
    lines = [f"cost model: target step {profile['target_step_ms']:.2f} ms, draft step "
             f"{profile['draft_step_ms']:.3f} ms per token, c = {profile['c']:.4f}",
             "verify cost of n tokens (v = time / one plain step):",
             table([["n"] + [str(w) for w in widths],
                    ["ms"] + [f"{profile['verify_ms'][w]:.1f}" for w in widths],
                    ["v"] + [f"{profile['v'][w]:.2f}" for w in widths]]),
             f"alpha inferred from measured tau per k (alpha_from_tau, rounds that drafted k); "
             f"pooled alpha = {profile['pooled_alpha']:.3f}; m = share of rounds that drafted",
             table([["k", "tau", "alpha", "m", "ideal", "ideal@pooled", "measured"]] + [
                 [str(r["k"]), fmt(r["tau"], 2), fmt(r["alpha"], 3), fmt(r["match_rate"], 2),
                  fmt(r["ideal_speedup"], 2, "x"), fmt(r["ideal_speedup_pooled_alpha"], 2, "x"),
                  fmt(r["measured_speedup"], 2, "x")] for r in profile["rows"]]),
             f"best k: {profile['best_k_ideal']} by the cost model (pooled alpha), "
             f"{profile['best_k_measured']} measured"]
    return "\n".join(lines)
