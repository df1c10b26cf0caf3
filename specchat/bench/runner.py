"""Runs a benchmark: every arm on every prompt, in an order that rotates from one
prompt to the next so no arm always runs first (warm caches, thermal drift), after
one warm-up answer per arm. With repeats, each prompt is answered that many times by
every arm, interleaved (the rotation goes on between repeats), and each arm keeps its
run of median time: on a shared machine single timings scatter by a quarter, and a
median of interleaved runs is what a ratio between arms can stand on. Knows nothing
about formatting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from specchat.bench.arms import Arm, ArmRun
from specchat.bench.prompts import BenchPrompt

WARMUP_TOKENS = 8


@dataclass
class PromptResult:
    """Every arm's answer to one prompt."""

    prompt: BenchPrompt
    prompt_tokens: int
    runs: dict[str, ArmRun] = field(default_factory=dict)


def prompt_ids(tokenizer, text: str) -> list[int]:
    """The chat-templated ids every arm starts from."""
    from specchat.chat.conversation import render_prompt

    return render_prompt(tokenizer, [{"role": "user", "content": text}])


def rotated(arms: Sequence[Arm], index: int) -> list[Arm]:
    """The arms starting from `index` modulo their number: an alternating order."""
    shift = index % len(arms)
    return list(arms[shift:]) + list(arms[:shift])


def warm_up(arms: Sequence[Arm], ids: list[int]) -> None:
    """One short answer per arm, so first-call costs land in no measurement."""
    for arm in arms:
        arm.run(ids, WARMUP_TOKENS)


def run_prompts(arms: Sequence[Arm], tokenizer, prompts: Sequence[BenchPrompt],
                max_new_tokens: int,
                progress: Callable[[PromptResult], None] = lambda _: None,
                repeats: int = 1) -> list[PromptResult]:
    """Every arm on every prompt `repeats` times, alternating the order; warm-up first."""
    encoded = [prompt_ids(tokenizer, p.prompt) for p in prompts]
    warm_up(arms, encoded[0])
    results = []
    for index, (prompt, ids) in enumerate(zip(prompts, encoded)):
        runs: dict[str, list[ArmRun]] = {arm.key: [] for arm in arms}
        for repeat in range(repeats):
            for arm in rotated(arms, index * repeats + repeat):
                runs[arm.key].append(arm.run(ids, max_new_tokens))
        result = PromptResult(prompt, len(ids), {key: median_run(runs[key]) for key in runs})
        results.append(result)
        progress(result)
    return results


def median_run(runs: Sequence[ArmRun]) -> ArmRun:
    """The run of median wall time (of an even count, the faster of the middle two)."""
    return sorted(runs, key=lambda run: run.seconds)[(len(runs) - 1) // 2]
