"""`bench acceptance`: a pair's acceptance on the prompt set, with only specchat's two arms.

Speculative and target-only, each prompt answered by both: acceptance, τ and α per
category and in total (counted in the target's tokens, whatever the draft's tokenizer), and
whether every greedy answer is the target-only answer token for token. No other program
runs, so it is the cheapest measure of a draft (a cross-tokenizer draft, a draft for a
backend `bench run` has no arms for). Its tokens/s are shown too, but acceptance does not
depend on timing: on a busy machine read acceptance and identity only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from specchat.bench.prompts import BenchPrompt
    from specchat.bench.reports import ComparisonReport
    from specchat.chat.pair import Pair


def run_acceptance(pair: Pair, prompts: Sequence[BenchPrompt], path: Path, max_new_tokens: int,
                   seed: int, on_prompt, keep_going=lambda: True) -> ComparisonReport:
    """Both specchat arms on every prompt (bench/modes.py's `measure`)."""
    from specchat.bench.arms import SpecchatArm
    from specchat.bench.modes import measure
    from specchat.bench.reports import ComparisonReport
    from specchat.engine import Settings
    from specchat.engine.adaptive import settings_for

    sampling = pair.config.sampling
    arms = [SpecchatArm("target", "specchat target-only", pair, Settings(0, sampling), False,
                        seed),
            SpecchatArm("spec", "specchat speculative", pair,
                        settings_for(pair.config.k, sampling), True, seed)]
    meta, tables, _ = measure(pair, arms, prompts, path, max_new_tokens, on_prompt, 1, keep_going)
    return ComparisonReport(meta, tables)


def pooled_acceptance(pair: Pair, prompts: Sequence[BenchPrompt], max_new_tokens: int, k: int,
                      seed: int = 0):
    """The speculative arm alone at a fixed k over `prompts`: its statistics pooled (the
    engine's `SpecStats`: α from the acceptance events, the acceptance rate, τ)."""
    from specchat.bench.arms import SpecchatArm
    from specchat.bench.runner import prompt_ids
    from specchat.engine import Settings
    from specchat.engine.stats import SpecStats

    arm = SpecchatArm("spec", "specchat speculative", pair, Settings(k, pair.config.sampling),
                      True, seed)
    pooled = SpecStats()
    for prompt in prompts:
        pooled.merge(arm.run(prompt_ids(pair.tokenizer, prompt.prompt), max_new_tokens).stats)
    return pooled
