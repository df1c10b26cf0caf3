"""Runs a benchmark: every arm on every prompt, in an order that changes from one
prompt to the next (a Williams design: over a cycle every arm runs in every place
equally often and follows every other arm equally often), after one warm-up answer per
arm. A plain rotation gave each arm the same predecessor every time, and an arm pays for
what ran before it: specchat's arm, always after llama-cpp-python's own `generate`, read
3% slower than the identical target-only arm beside it. With repeats, each prompt is answered that many times by
every arm, interleaved (the design's orders go on between repeats), and each arm keeps its
run of median time: on a shared machine single timings scatter by a quarter, and a
median of interleaved runs is what a ratio between arms can stand on.

A prompt that follows another (an MT-bench question's later turn) is asked after that
prompt's conversation and the reference arm's answer to it (specchat target-only). An arm
that `follows_reference` (llama-bench, which times a given length rather than answering)
runs after the others of each repeat, for as many tokens as the reference answered. Knows
nothing about formatting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from specchat.bench.arms import Arm, ArmRun
from specchat.bench.prompts import BenchPrompt


WARMUP_TOKENS = 8
REFERENCE = "target"
"""The arm whose answers the others are compared with and later turns follow."""


@dataclass
class PromptResult:
    """Every arm's answer to one prompt."""

    prompt: BenchPrompt
    prompt_tokens: int
    runs: dict[str, ArmRun] = field(default_factory=dict)


def prompt_ids(tokenizer: Any, text: str) -> list[int]:
    """The chat-templated ids every arm starts from."""
    return conversation_ids(tokenizer, [{"role": "user", "content": text}])


TURN_ROOM = 16
"""Tokens a chat template adds around an earlier turn's answer (a generous bound)."""


def longest_sequence(tokenizer: Any, prompts: Sequence[BenchPrompt], max_new_tokens: int) -> int:
    """The most tokens any prompt's conversation reaches with its answer: its own ids, and
    those of the turns it follows, each answer at most `max_new_tokens` long. A static
    cache captures the attention spans up to it before timing (bench/modes.py `load`)."""
    by_id = {p.id: p for p in prompts}

    def reach(prompt: BenchPrompt) -> int:
        earlier = by_id.get(prompt.follows) if prompt.follows else None
        before = reach(earlier) + TURN_ROOM if earlier is not None else 0
        return before + len(prompt_ids(tokenizer, prompt.prompt)) + max_new_tokens

    return max((reach(p) for p in prompts), default=max_new_tokens)


def conversation_ids(tokenizer: Any, messages: list[dict]) -> list[int]:
    from specchat.chat.conversation import render_prompt

    return render_prompt(tokenizer, messages)


Asked = dict[str, tuple[list[dict], ArmRun]]
"""Per prompt id: the messages it was asked with, and the reference arm's answer."""


def messages_for(tokenizer: Any, prompt: BenchPrompt, asked: Asked) -> list[dict]:
    """The prompt as the last user turn, after the conversation it follows (if any) and the
    reference arm's answer to that."""
    turn = [{"role": "user", "content": prompt.prompt}]
    if prompt.follows not in asked:
        return turn
    messages, answer = asked[prompt.follows]
    text = tokenizer.decode(answer.tokens, skip_special_tokens=True)
    return messages + [{"role": "assistant", "content": text}] + turn


def williams_orders(n: int) -> list[list[int]]:
    """Orders of n arms in which each arm takes every place, and follows every other arm,
    equally often (Williams, 1949): n orders for an even n, 2n (each also reversed) for odd."""
    first = [0] + [(j + 1) // 2 if j % 2 else n - j // 2 for j in range(1, n)]  # 0, 1, n-1, 2, ...
    orders = [[(place + shift) % n for place in first] for shift in range(n)]
    return orders + ([order[::-1] for order in orders] if n % 2 else [])


def in_design_order(arms: Sequence[Arm], index: int) -> list[Arm]:
    """The arms in the `index`-th order of their Williams design (cyclically)."""
    orders = williams_orders(len(arms))
    return [arms[i] for i in orders[index % len(orders)]]


def warm_up(arms: Sequence[Arm], ids: list[int]) -> None:
    """One short answer per arm, so first-call costs land in no measurement."""
    for arm in arms:
        arm.run(ids, WARMUP_TOKENS)


def run_prompts(arms: Sequence[Arm], tokenizer: Any, prompts: Sequence[BenchPrompt],
                max_new_tokens: int,
                progress: Callable[[PromptResult], None] = lambda _: None,
                repeats: int = 1,
                keep_going: Callable[[], bool] = lambda: True) -> list[PromptResult]:
    """Every arm on every prompt `repeats` times, alternating the order; warm-up first.
    Before each prompt after the first, `keep_going` may end the run (a time budget): the
    prompts answered so far are returned, each answered whole by every arm."""
    warm_up(arms, prompt_ids(tokenizer, prompts[0].prompt))
    asked: Asked = {}
    results: list[PromptResult] = []
    for index, prompt in enumerate(prompts):
        if results and not keep_going():
            break
        messages = messages_for(tokenizer, prompt, asked)
        ids = conversation_ids(tokenizer, messages)
        runs: dict[str, list[ArmRun]] = {arm.key: [] for arm in arms}
        for repeat in range(repeats):
            answer_once(arms, ids, max_new_tokens, index * repeats + repeat, runs)
        result = PromptResult(prompt, len(ids), {key: median_run(runs[key]) for key in runs})
        asked[prompt.id] = (messages, reference_run(result))
        results.append(result)
        progress(result)
    return results


def answer_once(arms: Sequence[Arm], ids: list[int], max_new_tokens: int, turn: int,
                runs: dict[str, list[ArmRun]]) -> None:
    """Every arm answers `ids` once, in the design's order for `turn`; arms that follow
    the reference answer for as many tokens as it did."""
    answering = [arm for arm in arms if not getattr(arm, "follows_reference", False)]
    for arm in in_design_order(answering, turn):
        runs[arm.key].append(arm.run(ids, max_new_tokens))
    length = len(runs.get(REFERENCE, runs[answering[0].key])[-1].tokens)
    for arm in arms:
        if getattr(arm, "follows_reference", False):
            runs[arm.key].append(arm.run(ids, max(1, length)))


def reference_run(result: PromptResult) -> ArmRun:
    """The answer later turns follow: specchat target-only's, else the first arm's."""
    return result.runs.get(REFERENCE) or next(iter(result.runs.values()))


def median_run(runs: Sequence[ArmRun]) -> ArmRun:
    """The run of median wall time (of an even count, the faster of the middle two)."""
    return sorted(runs, key=lambda run: run.seconds)[(len(runs) - 1) // 2]
