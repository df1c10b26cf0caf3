"""`pairs --suggest TARGET --measure`: the first candidates loaded beside the target and measured.

For each: α, the per-token acceptance, from the acceptance events of a few packaged prompts
(the first of each category, greedy, k = MEASURE_K; bench/acceptance.py), counted in the
target's tokens whatever the draft's tokenizer; the step costs c and v(n), timed as
`pairs --check --measure` times them (commands/advice.py's `timed_costs`, engine/costs.py);
and from those, by the theory's formulas (engine/theory.py), the best k and the speedup it
projects on this machine. A candidate that cannot be loaded or measured says why in its row.
"""

from __future__ import annotations

from typing import Callable

from specchat.commands.suggest import Candidate, Suggestion

MEASURE_K = 4
MEASURE_TOKENS = 48
"""New tokens per prompt: enough for α, short enough for a CPU."""
MEASURE_THREADS = 0
"""CPU threads of the CPU backends while measuring (0: the pair's own choice, every core)."""


def measure(result: Suggestion, top: int, progress: Callable[[str], None]) -> None:
    """Measure the first `top` candidates in place (their `measured`)."""
    from specchat.errors import SpecchatError

    for candidate in result.candidates[:top]:
        progress(f"measuring {candidate.card.ref} as a draft for {result.target.ref}")
        try:
            candidate.measured = measured(result.target.ref, candidate, progress)
        except (SpecchatError, RuntimeError, ValueError) as error:
            candidate.measured = {"problem": str(error).splitlines()[0] if str(error) else
                                  type(error).__name__}


def measured(target: str, candidate: Candidate, progress: Callable[[str], None]) -> dict:
    from specchat.bench.acceptance import pooled_acceptance
    from specchat.commands.advice import timed_costs
    from specchat.engine.params import K_MAX
    from specchat.engine.theory import acceptance_alpha, best_k
    from specchat.models.config.pairs import PairConfig
    from specchat.models.loader import load_pair

    pair = load_pair(PairConfig("suggest", target, candidate.card.ref, k=MEASURE_K,
                                threads=MEASURE_THREADS), progress=progress)
    stats = pooled_acceptance(pair, few_prompts(), MEASURE_TOKENS, MEASURE_K)
    alpha = acceptance_alpha(stats.position_accepted, stats.position_tried) or 0.0
    timed, problem = timed_costs(pair, None, progress)
    costs = timed.costs
    k, speedup = best_k(alpha, costs.c or 0.0, costs.v, K_MAX)
    return {"alpha": alpha, "acceptance_rate": stats.acceptance_rate, "tokens": stats.tokens,
            "c": costs.c or 0.0, "best_k": k,
            "projected_speedup": None if problem else speedup, "timing_problem": problem,
            "costs": timed.report(), "cross_tokenizer": pair.draft_tokenizer is not None}


def few_prompts():
    """The first packaged prompt of each category."""
    from specchat.bench.prompts import default_prompts_file, load_prompts

    firsts = {}
    for prompt in load_prompts(default_prompts_file()):
        firsts.setdefault(prompt.category, prompt)
    return list(firsts.values())
