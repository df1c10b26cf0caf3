"""Verify cost on llama.cpp beside torch's, and the acceptance a draft needs to pay off.

`llamacpp_costs` measures, as engine/costs.py's `Costs`: one evaluation of n tokens
with logits for all n after a context (200 tokens by default), for every fixed k's
n = k + 1 (engine.costs.WIDTHS), after the context evaluated once and the cache cut back
to it each time, timed by the engine's timer (`forward_timer`), and the draft's one-token step (a GGUF draft on llama.cpp, or specchat's n-gram lookup). The report gives the
break-even α of each k (theory.break_even_alpha: the per-token acceptance above which
speculation with draft length k beats plain decoding; 0 when even α = 0 pays, None
when no α can). `cost_table` prints backends side by side.
Knows nothing about `bench`'s arms or reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from specchat.engine.costs import WIDTHS, Costs, draft_step_cost, filler_ids, median_seconds
from specchat.engine.theory import break_even_alpha


BREAK_EVEN_KS = (1, 2, 3, 4)


def forward_timer(llm: Any, context: list[int]) -> Callable[[int, int], float]:
    """seconds(width, repeats): the median seconds of one llama.cpp evaluation of `width`
    tokens after `context` (logits for all; `llm` opened with logits_all=True), after one
    untimed warm-up evaluation. The context is evaluated once, now: every evaluation, of
    any width, starts from it alone (the cache is cut back to it after each)."""
    from specchat.models.llamacpp.baselines import evaluation

    evaluate = evaluation(llm, context)

    def seconds(width: int, repeats: int) -> float:
        ids = filler_ids(context, width)
        evaluate(ids)
        return median_seconds(lambda: evaluate(ids), repeats)

    return seconds


def forward_seconds(llm: Any, context: list[int], width: int, repeats: int = 5) -> float:
    """Median seconds of one llama.cpp evaluation of `width` tokens after `context`
    (`forward_timer`)."""
    return forward_timer(llm, context)(width, repeats)


def llamacpp_costs(target: Path, context: list[int], threads: int, draft: Path | None = None,
                   drafter: Any=None, widths: Sequence[int]=WIDTHS, repeats: int = 5) -> Costs:
    """Step and verify costs of the GGUF `target` on llama.cpp; the draft's from the GGUF
    `draft` on llama.cpp, or from `drafter` (an engine drafter such as n-gram lookup)."""
    from specchat.models.llamacpp.baselines import open_llama

    n_ctx = len(context) + max(widths) + 16
    llm = open_llama(target, threads, n_ctx=n_ctx, logits_all=True)
    seconds = forward_timer(llm, context)
    verify = {w: seconds(w, repeats) for w in widths}
    if draft is not None:
        small = open_llama(draft, threads, n_ctx=n_ctx, logits_all=True)
        draft_s = forward_seconds(small, context, 1, repeats)
    else:
        draft_s = draft_step_cost(drafter, context, repeats)
    return Costs.of(verify, draft_s)


def cost_report(costs: Costs, ks: Sequence[int] = BREAK_EVEN_KS) -> dict:
    c = costs.c
    alphas = {k: None if c is None else break_even_alpha(k, c, costs.v) for k in ks}
    return costs.report() | {"break_even_alpha": alphas}


def cost_table(reports: dict[str, dict], context: int) -> str:
    """Backends side by side: v(n), step times and c, break-even α per k."""
    from specchat.bench.format import fmt, table

    widths = sorted({int(w) for r in reports.values() for w in r["v"]})
    ks = sorted({int(k) for r in reports.values() for k in r["break_even_alpha"]})
    verify = [["n"] + [str(w) for w in widths]]
    for name, r in reports.items():
        verify.append([f"{name} ms"] + [f"{value(r['verify_ms'], w):.2f}" for w in widths])
        verify.append([f"{name} v"] + [f"{value(r['v'], w):.2f}" for w in widths])
    steps = [["backend", "target step ms", "draft step ms", "c"]] + [
        [name, f"{r['target_step_ms']:.2f}", f"{r['draft_step_ms']:.3f}", f"{r['c']:.3f}"]
        for name, r in reports.items()]
    alphas = [["k"] + [str(k) for k in ks]] + [
        [name] + [fmt(value(r["break_even_alpha"], k), 3) if value(r["break_even_alpha"], k)
                  is not None else "never" for k in ks] for name, r in reports.items()]
    return "\n".join([f"verify cost of n tokens after {context} tokens of context "
                      "(v = time / one 1-token step):", table(verify), "",
                      "one step of each model (c = draft step / target step):", table(steps), "",
                      "break-even acceptance α per draft length k (speculation pays above it):",
                      table(alphas)])


def value(mapping: dict, key: int):
    """A per-n or per-k entry, whether the keys are ints or (after JSON) strings."""
    return mapping[key] if key in mapping else mapping[str(key)]
