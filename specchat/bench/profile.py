"""The cost model behind a pair's speedup, measured: the draft/target step cost
ratio c, the verify cost v(n) of n tokens relative to one plain step, the
acceptance α from the acceptance events (accepted / tested draft positions), and
the ideal speedup of each k (docs/design.md §4) next to the one measured in the same run.

For a drafter that does not always draft (n-gram lookup without a match) the
ideal speedup weighs drafting rounds by the measured match rate m (theory.speedup_at).
The costs are engine/costs.py's, the formulas engine/theory.py's: nothing is derived
here. Works on any engine `CausalModel`; knows nothing about transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from specchat.chat.decoding import drafter_for
from specchat.engine import costs as engine_costs
from specchat.engine.costs import Costs
from specchat.engine.stats import SpecStats
from specchat.engine.theory import measured_speedup, speedup_at

if TYPE_CHECKING:
    from specchat.bench.arms import ArmRun
    from specchat.bench.runner import PromptResult
    from specchat.chat.pair import Pair


def measure_costs(pair: Pair, context: list[int], repeats: int = 5) -> Costs:
    return engine_costs.measure_costs(pair.target, drafter_for(pair), context, repeats=repeats)


def run_acceptance(runs: Sequence[ArmRun]) -> tuple[float | None, float]:
    """(α from the acceptance events, match rate m) of some answers of one arm.

    α is pooled over draft positions that were really tested (theory.acceptance_alpha),
    so rounds that drafted fewer tokens (end of the budget, an EOS, a short n-gram
    continuation) or none at all do not drag it down; m is the share of rounds that drafted.
    """
    stats = SpecStats()
    for run in runs:
        stats.merge(run.stats)
    match = stats.drafting_rounds / stats.rounds if stats.rounds else 0.0
    return stats.alpha, match


def profile_rows(results: Sequence[PromptResult], ks: Sequence[int], costs: Costs) -> list[dict]:
    """Per k: α from acceptance events, match rate, τ, ideal and measured speedup."""
    target_rate = rate([r.runs["target"] for r in results])
    c = costs.c if costs.c is not None else 0.0  # timed with a free "draft" where there is none
    rows: list[dict[str, Any]] = []
    for k in ks:
        runs = [r.runs[f"k{k}"] for r in results]
        alpha, match = run_acceptance(runs)
        alpha = alpha or 0.0
        rounds = sum(r.rounds for r in runs)
        rows.append({"k": k, "tau": sum(len(r.tokens) for r in runs) / rounds if rounds else None,
                     "alpha": alpha, "match_rate": match,
                     "ideal_speedup": speedup_at(alpha, k, c, costs.v, match),
                     "measured_speedup": measured_speedup(rate(runs), target_rate)})
    pooled = pooled_alpha(rows)
    for row in rows:
        row["ideal_speedup_pooled_alpha"] = speedup_at(pooled, row["k"], c, costs.v,
                                                       row["match_rate"])
    return rows


def pooled_alpha(rows: list[dict]) -> float:
    weights = [r["match_rate"] for r in rows]
    if not sum(weights):
        return 0.0
    return sum(r["alpha"] * w for r, w in zip(rows, weights)) / sum(weights)


def rate(runs: Sequence[ArmRun]) -> float:
    seconds = sum(r.seconds for r in runs)
    return sum(len(r.tokens) for r in runs) / seconds if seconds else 0.0


def profile_report(results: Sequence[PromptResult], ks: Sequence[int], costs: Costs) -> dict:
    rows = profile_rows(results, ks, costs)
    measured = [r for r in rows if r["measured_speedup"] is not None]
    best_measured = max(measured, key=lambda r: r["measured_speedup"])["k"] if measured else None
    return costs.report() | {
        "pooled_alpha": pooled_alpha(rows), "rows": rows,
        "best_k_ideal": max(rows, key=lambda r: r["ideal_speedup_pooled_alpha"])["k"],
        "best_k_measured": best_measured}


def format_profile(profile: dict) -> str:
    from specchat.bench.format import fmt, table

    widths = sorted(profile["verify_ms"], key=int)  # keys are strings after a JSON round trip
    lines = [f"cost model: target step {profile['target_step_ms']:.2f} ms, draft step "
             f"{profile['draft_step_ms']:.3f} ms per token, c = {profile['c']:.4f}",
             "verify cost of n tokens (v = time / one plain step):",
             table([["n"] + [str(w) for w in widths],
                    ["ms"] + [f"{profile['verify_ms'][w]:.1f}" for w in widths],
                    ["v"] + [f"{profile['v'][w]:.2f}" for w in widths]]),
             f"alpha from the acceptance events per k (accepted / tested draft positions); "
             f"pooled alpha = {profile['pooled_alpha']:.3f}; m = share of rounds that drafted",
             table([["k", "tau", "alpha", "m", "ideal", "ideal@pooled", "measured"]] + [
                 [str(r["k"]), fmt(r["tau"], 2), fmt(r["alpha"], 3), fmt(r["match_rate"], 2),
                  fmt(r["ideal_speedup"], 2, "x"), fmt(r["ideal_speedup_pooled_alpha"], 2, "x"),
                  fmt(r["measured_speedup"], 2, "x")] for r in profile["rows"]]),
             f"best k: {profile['best_k_ideal']} by the cost model (pooled alpha), "
             f"{profile['best_k_measured']} measured"]
    return "\n".join(lines)
