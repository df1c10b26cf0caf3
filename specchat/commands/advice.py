"""`specchat pairs --check NAME [--measure]`: will this pair fit here, and should it speculate?

For each model: parameters and weight bytes, read without loading (commands/model_facts.py),
and KV cache bytes per token; then the memory there is. Then the pair's step `Costs`
(engine/costs.py, their one owner), for verifies of 1..k_max + 1 tokens (k_max: the pair's
fixed k, or k = "auto"'s longest draft):
- predicted: decoding one token at batch 1 reads every weight once, so a verify of a few
  tokens costs one step (v(n) = 1) and the draft/target step cost ratio c is their
  weight-byte ratio. True on a GPU and on Apple silicon; optimistic on a CPU, whose
  verifies are compute-bound;
- measured (`--measure`): the pair is loaded and its forwards timed as the chat's
  calibration times them (chat/calibrate.py; noisy on a busy machine).

From the costs, by the theory's formulas (engine/theory.py, their one owner): v(n), c and
the break-even α of each k; which drafter can pay here (the pair's draft model at its c,
an n-gram lookup at c ≈ 0, or none); the best k at the draft's acceptance (a `specchat
distill` draft records its held-out rate) or at assumed ones; and, where the costs were
measured, what the pair would gain where a verify costs about one step. Knows nothing
about the TUI; imports no transformers (the models layer does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from specchat.commands.model_facts import ModelFacts, facts_line, pair_facts, size_text
from specchat.engine.costs import Costs
from specchat.engine.costs import PRIOR_WIDTHS
from specchat.engine.params import K_MAX
from specchat.engine.theory import best_k, break_even_alpha, cheapest_break_even

if TYPE_CHECKING:
    from specchat.chat.pair import Pair

ASSUMED_ALPHAS = (0.5, 0.6, 0.7, 0.8)
"""Acceptance rates shown when the draft's own is unknown."""
PREDICTED = "predicted from weight bytes: v(n) = 1 as on a GPU or Apple silicon; optimistic on a CPU"
MEASURE_REPEATS = 9
"""Timed forwards per width with --measure (their median counts)."""
Alphas = list[tuple[float, str]]
"""(α, where it came from) pairs the verdicts are shown at."""


def k_max_of(pair: Pair) -> int:
    """The longest draft the report covers: the pair's fixed k, or k = "auto"'s range."""
    return pair.k if isinstance(pair.k, int) and pair.k > 0 else K_MAX


def predicted_costs(target: ModelFacts, draft: ModelFacts | None, k_max: int) -> Costs:
    """Memory-bound decoding: a step costs its weight bytes; a verify of up to k_max + 1
    tokens costs one step; an n-gram lookup (no draft model) costs nothing."""
    c = draft.weight_bytes / target.weight_bytes if draft is not None else 0.0
    return Costs.of({n: 1.0 for n in range(1, k_max + 2)}, c)


def measured_costs(pair: Pair, progress: Callable[[str], None]) -> Costs:
    """The loaded pair's costs, timed as the chat's calibration times them (more repeats:
    nothing waits for this report): every width of a fixed k, PRIOR_WIDTHS for "auto"
    (wider verifies extended from them, as k = "auto" extends them)."""
    from specchat.chat.calibrate import measure_prior
    from specchat.models.loader import load_pair

    fixed = isinstance(pair.k, int) and pair.k > 0
    widths = range(1, pair.k + 2) if fixed else PRIOR_WIDTHS
    return measure_prior(load_pair(pair, progress=progress), widths, MEASURE_REPEATS)


def cost_lines(costs: Costs, how: str, k_max: int) -> list[str]:
    """v(n), c and the break-even α of each k, as two small tables."""
    from specchat.bench.format import table

    widths = costs.widths
    evens = [break_even_alpha(k, costs.c or 0.0, costs.v) for k in range(1, k_max + 1)]
    return [f"step costs ({how}):",
            indent(table([["n"] + [str(n) for n in widths],
                          ["v(n)"] + [f"{costs.v(n):.2f}" for n in widths]])),
            f"  draft step c = {costs.c or 0.0:.2f} target steps",
            "break-even acceptance α per draft length k (speculation pays above it):",
            indent(table([["k"] + [str(k) for k in range(1, k_max + 1)],
                          ["α"] + [alpha_text(a) for a in evens]]))]


def alpha_text(alpha: float | None) -> str:
    """A break-even α as shown: never (no α pays), any (even α = 0 pays), or the number."""
    return "never" if alpha is None else "any" if alpha == 0 else f"{alpha:.2f}"


def indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def drafter_lines(pair: Pair, costs: Costs, k_max: int) -> list[str]:
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
    cheapest = cheapest_break_even(costs.c, costs.v, k_max)
    lines = [f"where a verify costs about one step (a GPU, Apple silicon): v(n) = 1, "
             f"c = {costs.c:.2f} from weight bytes"
             + (f"; {pays_text(*cheapest)}" if cheapest else "; no k pays")]
    return lines + ["  " + line for line in best_k_lines(costs, alphas, k_max, "there")]


def alphas_for(alpha: float | None, why: str) -> Alphas:
    if alpha is not None:
        return [(alpha, f" ({why})")]
    return [(a, " (assumed)") for a in ASSUMED_ALPHAS]


def check_lines(pair: Pair, measure: bool = False, progress: Callable[[str],
                None] = lambda _: None) -> list[str]:
    """The whole `pairs --check` report for one pair on this machine."""
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
    costs = (measured_costs(pair, progress) if measure
             else predicted_costs(facts.target, facts.draft, k_max))
    how = (f"measured on {facts.device}: median of {MEASURE_REPEATS} timed forwards per width, "
           "noisy on a busy machine" if measure else PREDICTED)
    alphas = alphas_for(facts.alpha, facts.alpha_why)
    lines += cost_lines(costs, how, k_max) + drafter_lines(pair, costs, k_max)
    lines += best_k_lines(costs, alphas, k_max, "here")
    return lines + (one_step_lines(facts.target, facts.draft, alphas, k_max) if measure else [])


def memory_lines(pair: Pair, facts: Sequence[ModelFacts]) -> list[str]:
    from specchat.errors import OutOfMemory
    from specchat.models.device.placement import (automatic_limits, current_inventory, describe,
                                                  plan_placement)

    models = [m for m in (facts.target, facts.draft) if m is not None]
    total = sum(m.weight_bytes + m.kv_bytes_per_token * facts.context for m in models)
    inventory = current_inventory()
    lines = [f"memory: about {size_text(total)} in all (weights + KV cache at {facts.context} "
             f"tokens); available: {describe(automatic_limits(inventory))}"]
    if facts.llamacpp:
        return lines + [f"placement: {facts.llamacpp}"]
    try:
        place = plan_placement(facts.target.weight_bytes, pair.device, inventory, pair.max_memory,
                               name=f"target {pair.target}")
        lines.append(f"placement: {place.why or place.device}")
    except OutOfMemory as error:
        lines.append(f"does NOT fit: {error}")
    return lines
