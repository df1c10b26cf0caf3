"""`specchat pairs --check NAME [--measure]`: will this pair fit here, and should it speculate?

For each model: parameters and weight bytes, read without loading (commands/model_facts.py),
and KV cache bytes per token; then the memory there is. Then the pair's step `Costs`
(engine/costs.py, their one owner), for verifies of 1..k_max + 1 tokens (k_max: the pair's
fixed k, or k = "auto"'s longest draft):
- predicted: decoding one token at batch 1 reads every weight once, so a verify of a few
  tokens costs one step (v(n) = 1) and the draft/target step cost ratio c is their
  weight-byte ratio. True on a GPU and on Apple silicon; optimistic on a CPU, whose
  verifies are compute-bound;
- measured (`--measure`): the pair is loaded, each model warmed up, and its forwards
  timed in interleaved rounds (engine/costs.time_rounds) at the chat's baseline context
  (chat/baseline_timing.py). The machine's load and the spread of the rounds are reported; where
  the spread is large or c is far from the weight-size ratio, the timing is repeated (a few
  times at most) and, still unsteady, the verdict is withheld rather than given on noise.

From the costs, by the theory's formulas (engine/theory.py, their one owner): v(n), c and
the break-even α of each k; which drafter can pay here (the pair's draft model at its c,
an n-gram lookup at c ≈ 0, or none); the best k at the draft's acceptance (a `specchat
distill` draft records its held-out rate) or at assumed ones; and, where the costs were
measured, what the pair would gain where a verify costs about one step. Knows nothing
about the TUI; imports no transformers (the models layer does).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from specchat.chat.remembered_costs import remembered_for_config
from specchat.commands.model_facts import ModelFacts, PairFacts, facts_line, pair_facts
from specchat.sizes import size_text
from specchat.engine.costs import PRIOR_WIDTHS, WARMUP_STEPS, Clock, Costs, TimedCosts
from specchat.engine.params import K_MAX
from specchat.engine.theory import best_k, break_even_alpha, cheapest_break_even

if TYPE_CHECKING:
    from specchat.chat.pair import Pair
    from specchat.models.config.pairs import PairConfig

ASSUMED_ALPHAS = (0.5, 0.6, 0.7, 0.8)
"""Acceptance rates shown when the draft's own is unknown."""
PREDICTED = "predicted from weight bytes: v(n) = 1 as on a GPU or Apple silicon; optimistic on a CPU"
PREDICTED_INT8 = ("predicted from weight bytes: v(n) = 1, about what the int8 backend's verify "
                  "costs on a CPU for a few tokens (it grows past about 8); --measure times it")


def predicted_how(facts: PairFacts) -> str:
    """How the predicted costs were made, and how far to trust them for this backend."""
    return PREDICTED_INT8 if facts.target_backend == "int8" else PREDICTED
MEASURE_ROUNDS, MEASURE_REPEATS, MEASURE_ATTEMPTS = 5, 3, 3
"""With --measure: interleaved rounds, timed forwards per width in each (their median
counts), and timings at most until they are steady."""
WEIGHT_BOUND_BYTES = 100 << 20
"""Below this a draft's step can be set by fixed costs (thread wake-ups, kernel launches,
Python) rather than its weight reads, so its c says nothing of the timings' health."""
Alphas = list[tuple[float, str]]
"""(α, where it came from) pairs the verdicts are shown at."""


def fixed_k(pair: PairConfig) -> int | None:
    """The pair's fixed draft length, or None for k = "auto" (and for k = 0)."""
    return pair.k if isinstance(pair.k, int) and pair.k > 0 else None


def k_max_of(pair: PairConfig) -> int:
    """The longest draft the report covers: the pair's fixed k, or k = "auto"'s range."""
    return fixed_k(pair) or K_MAX


def predicted_costs(target: ModelFacts, draft: ModelFacts | None, k_max: int) -> Costs:
    """Memory-bound decoding: a step costs its weight bytes; a verify of up to k_max + 1
    tokens costs one step; an n-gram lookup (no draft model) costs nothing."""
    c = draft.weight_bytes / target.weight_bytes if draft is not None else 0.0
    return Costs.of({n: 1.0 for n in range(1, k_max + 2)}, c)


def measured_costs(pair: PairConfig, progress: Callable[[str], None], expected_c: float | None,
                   clock: Clock = time.perf_counter) -> tuple[TimedCosts, str | None]:
    """The loaded pair's costs, timed until steady (engine/costs.steady_costs): (the timing,
    why it is still unsteady or None). Every width of a fixed k; PRIOR_WIDTHS for "auto"
    (wider verifies are extended from them, as k = "auto" extends them)."""
    from specchat.models.loader import load_pair

    return timed_costs(load_pair(pair, progress=progress), fixed_k(pair), progress,
                       expected_c, clock)


def timed_costs(loaded: Pair, k: int | None, progress: Callable[[str], None],
                expected_c: float | None = None,
                clock: Clock = time.perf_counter) -> tuple[TimedCosts, str | None]:
    """`measured_costs` of a pair already loaded: every width of a fixed `k`, PRIOR_WIDTHS
    for None (k = "auto")."""
    from specchat.chat.baseline_timing import baseline_costs_context
    from specchat.chat.decoding import drafter_for
    from specchat.engine.costs import steady_costs, time_rounds

    context, drafter = baseline_costs_context(loaded), drafter_for(loaded)
    widths = range(1, k + 2) if k else PRIOR_WIDTHS
    progress("timing the pair's forwards (a minute on a small CPU)")
    measure = lambda: time_rounds(loaded.target, drafter, context, widths,  # noqa: E731
                                  MEASURE_ROUNDS, MEASURE_REPEATS, None, clock)
    return steady_costs(measure, expected_c, MEASURE_ATTEMPTS)


def remembered_how(taken: float) -> str:
    """Where a remembered timing (chat/remembered_costs.py) came from."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(taken))
    return (f"timed on this machine at {when}, when this pair last loaded or idled in the chat:"
            " the median of 3 forwards per width; --measure times 5 interleaved rounds until"
            " they are steady")


def measured_how(device: str, timed: TimedCosts) -> str:
    return (f"measured on {device}: median of {timed.rounds} interleaved rounds of {timed.repeats} "
            f"timed forwards per width, after {WARMUP_STEPS} untimed steps; the rounds spread "
            f"{timed.spread:.0%}")


def load_line() -> str:
    """The machine's load average beside its cores: a busy machine's timings are noisy."""
    import os

    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):
        return "machine load: unknown here"
    return (f"machine load: {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min) on "
            f"{os.cpu_count() or '?'} cores")


def cost_lines(costs: Costs, how: str) -> list[str]:
    """v(n) and c as measured or predicted."""
    from specchat.bench.format import table

    widths = costs.widths
    return [f"step costs ({how}):",
            indent(table([["n"] + [str(n) for n in widths],
                          ["v(n)"] + [f"{costs.v(n):.2f}" for n in widths]])),
            f"  draft step c = {costs.c or 0.0:.2f} target steps"]


def break_even_lines(costs: Costs, k_max: int) -> list[str]:
    """The break-even α of each k, as a small table."""
    from specchat.bench.format import table

    evens = [break_even_alpha(k, costs.c or 0.0, costs.v) for k in range(1, k_max + 1)]
    return ["break-even acceptance α per draft length k (speculation pays above it):",
            indent(table([["k"] + [str(k) for k in range(1, k_max + 1)],
                          ["α"] + [alpha_text(a) for a in evens]]))]


def alpha_text(alpha: float | None) -> str:
    """A break-even α as shown: never (no α pays), any (even α = 0 pays), or the number."""
    return "never" if alpha is None else "any" if alpha == 0 else f"{alpha:.2f}"


def indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def drafter_lines(pair: PairConfig, costs: Costs, k_max: int) -> list[str]:
    """Which drafter can pay on these costs: the pair's draft model, an n-gram lookup, none."""
    ngram = pair.draft == "ngram"
    candidates = [] if ngram else [(f"draft {pair.draft}", costs.c or 0.0)]
    candidates.append(("n-gram lookup", (costs.c or 0.0) if ngram else 0.0))
    lines, payers = ["which drafter can pay here:"], []
    for name, c in candidates:
        cheapest = cheapest_break_even(c, costs.v, k_max)
        if cheapest is None:
            lines.append(f"  {name} (c = {c:.2f}): cannot pay: no k up to {k_max} beats a plain "
                         "step even if every draft were accepted")
            continue
        payers.append(name)
        lines.append(f"  {name} (c = {c:.2f}): {pays_text(*cheapest)}")
    lines.append("  → " + (" or ".join(payers) if payers else "none: decode target-only here"))
    if "n-gram lookup" in payers:
        lines.append("  (n-gram drafts are accepted where the answer repeats the prompt: "
                     "extraction, code edits; rarely on open chat)")
    return lines


def pays_text(k: int, alpha: float) -> str:
    """Where a drafter starts to pay, from `theory.cheapest_break_even`."""
    if alpha == 0:
        return f"pays at any acceptance (k = {k})"
    return f"pays where acceptance α ≥ {alpha:.2f} (k = {k})"


def best_k_lines(costs: Costs, alphas: Alphas, k_max: int, where: str) -> list[str]:
    """The best k and its ideal speedup at each α, on these costs."""
    lines = []
    for alpha, why in alphas:
        k, speedup = best_k(alpha, costs.c or 0.0, costs.v, k_max)
        verdict = ("plain decoding: speculation would lose" if k == 0
                   else f"ideal speedup {speedup:.2f}x, speculation expected to pay")
        lines.append(f"{where} at α = {alpha:.2f}{why}: best k = {k}, {verdict}")
    return lines


def one_step_lines(target: ModelFacts, draft: ModelFacts | None, alphas: Alphas,
                   k_max: int) -> list[str]:
    """What the pair would gain where a verify costs about one step (the same cost model,
    v(n) = 1 and c from weight bytes)."""
    costs = predicted_costs(target, draft, k_max)
    c = costs.c if costs.c is not None else 0.0  # predicted costs always price the draft step
    cheapest = cheapest_break_even(c, costs.v, k_max)
    lines = [f"where a verify costs about one step (a GPU, Apple silicon): v(n) = 1, "
             f"c = {costs.c:.2f} from weight bytes"
             + (f"; {pays_text(*cheapest)}" if cheapest else "; no k pays")]
    return lines + ["  " + line for line in best_k_lines(costs, alphas, k_max, "there")]


def alphas_for(alpha: float | None, why: str) -> Alphas:
    if alpha is not None:
        return [(alpha, f" ({why})")]
    return [(a, " (assumed)") for a in ASSUMED_ALPHAS]


def check_lines(pair: PairConfig, measure: bool = False, progress: Callable[[str],
                None] = lambda _: None, clock: Clock = time.perf_counter) -> list[str]:
    """The whole `pairs --check` report for one pair on this machine (`clock`: the timer
    of --measure's timings)."""
    facts = pair_facts(pair, progress)
    lines = [facts.header]
    if facts.target is None:
        return lines + [f"target {pair.target}: size unknown ({facts.why_unknown})"]
    lines += [facts_line(f, facts.context) for f in (facts.target, facts.draft) if f is not None]
    lines += memory_lines(pair, facts)
    if pair.draft is None or pair.k == 0:
        return lines + ["no draft (k = 0): plain decoding, nothing to predict"]
    k_max = k_max_of(pair)
    if isinstance(pair.k, str):
        lines.append(f"k = {pair.k}: shown for k = 1..{k_max}")
    alphas = alphas_for(facts.alpha, facts.alpha_why)
    remembered = None if measure else remembered_for_config(pair)
    if remembered is not None:
        costs, taken = remembered
        return (lines + cost_lines(costs, remembered_how(taken))
                + verdict_lines(pair, costs, alphas, k_max)
                + one_step_lines(facts.target, facts.draft, alphas, k_max))
    if not measure:
        costs = predicted_costs(facts.target, facts.draft, k_max)
        return lines + cost_lines(costs, predicted_how(facts)) + verdict_lines(pair, costs, alphas, k_max)
    timed, problem = measured_costs(pair, progress, weight_ratio(facts), clock)
    lines += [load_line()] + cost_lines(timed.costs, measured_how(facts.device, timed))
    if problem:
        lines.append(f"verdict withheld: {problem}; rerun on a quiet machine")
    else:
        lines += verdict_lines(pair, timed.costs, alphas, k_max)
    return lines + one_step_lines(facts.target, facts.draft, alphas, k_max)


def verdict_lines(pair: PairConfig, costs: Costs, alphas: Alphas, k_max: int) -> list[str]:
    """Break-even α per k, which drafter can pay, and the best k at each α, on `costs`."""
    return (break_even_lines(costs, k_max) + drafter_lines(pair, costs, k_max)
            + best_k_lines(costs, alphas, k_max, "here"))


def weight_ratio(facts) -> float | None:
    """The draft/target weight-size ratio a draft model's step cost c should be near, where
    both models are big enough for their weight reads to set their step costs."""
    if facts.draft is None or facts.draft.weight_bytes < WEIGHT_BOUND_BYTES:
        return None
    return facts.draft.weight_bytes / facts.target.weight_bytes


def memory_lines(pair: PairConfig, facts: PairFacts) -> list[str]:
    from specchat.errors import OutOfMemory
    from specchat.models.device.placement import (automatic_limits, current_inventory, describe,
                                                  plan_placement)

    models = [m for m in (facts.target, facts.draft) if m is not None]
    total = sum(m.weight_bytes + m.kv_bytes_per_token * facts.context for m in models)
    inventory = current_inventory()
    lines = [f"memory: about {size_text(total)} in all (weights + KV cache at {facts.context} "
             f"tokens); available: {describe(automatic_limits(inventory))}"]
    if facts.gguf_placement:
        return lines + [f"placement: {facts.gguf_placement}"]
    if facts.target is None:  # check_lines stops at an unknown size before it asks
        return lines
    try:
        place = plan_placement(facts.target.weight_bytes, pair.device, inventory, pair.max_memory,
                               name=f"target {pair.target}")
        lines.append(f"placement: {place.why or place.device}")
    except OutOfMemory as error:
        lines.append(f"does NOT fit: {error}")
    return lines
