"""Turns a benchmark's `PromptResult`s into JSON-ready tables (per prompt, per
category and in total): the body of a comparison or sweep report (bench.reports).

tokens/s of a group is its new tokens over its wall time (prefill included, the
same for every arm); a ratio is one arm's tokens/s over another's, measured in
the same run; the acceptance rate and τ are the engine's statistics' (SpecStats).
"identical" compares each arm's greedy output with specchat
target-only token for token. Knows nothing about models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from specchat.bench.format import rounded
from specchat.bench.runner import REFERENCE, PromptResult
from specchat.engine.stats import SpecStats
from specchat.engine.theory import measured_speedup

if TYPE_CHECKING:
    from specchat.bench.arms import ArmRun

RATIOS = (("spec", "target"), ("spec", "hf_spec"), ("target", "hf"), ("hf_spec", "hf"),
          ("spec", "hf"), ("spec", "llama_spec"), ("target", "llama"), ("llama_spec", "llama"),
          ("spec", "llama"), ("target", "llama_bench"), ("spec", "lcpp_draft"),
          ("spec", "lcpp_ngram-simple"), ("spec", "lcpp_ngram-map-k"))
"""Ratios of arms' tokens/s, where both arms ran (the last four: against llama.cpp's own
programs, bench/llama_programs.py)."""


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token (or of the shorter end); None if equal."""
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def arm_entry(runs: Sequence[ArmRun]) -> dict:
    """Totals over some answers of one arm."""
    seconds = sum(r.seconds for r in runs)
    totals = counts(runs)
    return {"tokens": totals.tokens, "seconds": round(seconds, 4),
            "tokens_per_s": round(totals.tokens / seconds, 3) if seconds > 0 else None,
            "rounds": totals.rounds or None, "drafted": totals.drafted or None,
            "accepted": totals.accepted or None,
            "acceptance_rate": rounded(totals.acceptance_rate, 4),
            "mean_acceptance_length": rounded(totals.mean_acceptance_length, 3),
            "outside_llama_ms_per_token": outside_llama(runs, seconds, totals.tokens)}


def counts(runs: Sequence[ArmRun]) -> SpecStats:
    """The runs' token, round, draft and acceptance counts as the engine's statistics, which
    own the acceptance rate and τ (llama.cpp's programs report drafts but no rounds)."""
    return SpecStats(rounds=sum(r.rounds for r in runs), drafted=sum(r.drafted for r in runs),
                     accepted=sum(r.accepted for r in runs),
                     tokens=sum(r.token_count for r in runs))


def outside_llama(runs: Sequence[ArmRun], seconds: float, tokens: int) -> float | None:
    """Milliseconds per token spent outside llama.cpp's decode calls (specchat's own work:
    logits copies, verification, sampling, bookkeeping), where the arm timed them."""
    inside = [getattr(r, "inside_llama_s", None) for r in runs]
    timed = [value for value in inside if value is not None]
    if not tokens or not inside or len(timed) < len(inside):
        return None
    return round(1000 * (seconds - sum(timed)) / tokens, 3)


def ratios(arms: dict) -> dict:
    out = {}
    for top, bottom in RATIOS:
        a, b = arms.get(top), arms.get(bottom)
        ratio = measured_speedup(a["tokens_per_s"], b["tokens_per_s"]) if a and b else None
        if ratio is not None:
            out[f"{top}/{bottom}"] = round(ratio, 3)
    return out


def identity(results: Sequence[PromptResult], key: str, greedy: bool) -> dict | None:
    """How many greedy answers of `key` equal specchat target-only's, token for token."""
    if not greedy or key == REFERENCE or not all(r.runs[key].ids_known for r in results):
        return None
    same = sum(r.runs[key].tokens == r.runs[REFERENCE].tokens for r in results)
    return {"identical": same, "answers": len(results)}


def group_entry(results: Sequence[PromptResult], keys: Sequence[str], greedy: bool) -> dict:
    arms = {key: arm_entry([r.runs[key] for r in results]) for key in keys}
    for key in keys:
        arms[key]["identical"] = identity(results, key, greedy)
    return {"prompts": len(results), "arms": arms, "ratios": ratios(arms)}


def prompt_entry(result: PromptResult, keys: Sequence[str], greedy: bool) -> dict:
    entry = group_entry([result], keys, greedy)
    reference = result.runs[REFERENCE].tokens
    for key in keys:
        if greedy and key != REFERENCE and result.runs[key].ids_known:
            entry["arms"][key]["first_difference"] = first_difference(result.runs[key].tokens,
                                                                      reference)
    entry.update(id=result.prompt.id, category=result.prompt.category,
                 prompt_tokens=result.prompt_tokens)
    return entry


def build_tables(labels: dict[str, str], results: Sequence[PromptResult], greedy: bool) -> dict:
    """The arms' tables as plain data (arms, prompts, categories, total): a report's body."""
    keys = list(labels)
    categories: dict[str, list[PromptResult]] = {}
    for result in results:
        categories.setdefault(result.prompt.category, []).append(result)
    return {"arms": labels,
            "prompts": [prompt_entry(r, keys, greedy) for r in results],
            "categories": {name: group_entry(group, keys, greedy)
                           for name, group in categories.items()},
            "total": group_entry(results, keys, greedy)}
