"""Measuring a pair's target-only `Baseline` (chat/baseline.py) on this machine.

The step cost at each context length is timed on the real decoding loop, as a race
would run it: the engine's `Decoder` with no drafter and the answer's sampling
settings, every round detokenized and counted as in an answer, the prompt's prefill
left out (only rounds after the first are timed). No EOS ends it early: the filler
prompt only has to be long. The engine's own timing of each round's target forward
(`Round.verify_s`) is kept beside it: the gauge compares an answer's forwards with it to
see the load the answer ran under. Then one forward of n tokens for n = 1..VERIFY_WIDTHS
and one draft step are timed (engine/costs.py's PRIOR_WIDTHS; wider verifies are extended
from them), the c and v(n) of the theory.

Runs in a worker thread and stops between rounds when `should_stop` says so.
Knows nothing about widgets.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import torch

from specchat.chat.baseline import Baseline
from specchat.chat.decoding import drafter_for
from specchat.chat.detok import IncrementalDetokenizer
from specchat.chat.metrics import AnswerMetrics
from specchat.chat.pair import Pair
from specchat.chat.remembered_costs import remember_costs, remembered_costs
from specchat.engine import Decoder, Finished, SamplingParams, Settings
from specchat.engine.adaptive import AdaptiveK
from specchat.engine.costs import PRIOR_WIDTHS, Costs, TimingStopped, filler_ids, measure_costs

CONTEXTS = (64, 512, 1536)
"""Context lengths timed after load; a conversation that outgrows them is measured further."""
STEPS = 12
VERIFY_WIDTHS = PRIOR_WIDTHS
"""The verify widths timed: those of k up to PRIOR_K_MAX (k = "auto" and the theory's best k
go on to K_MAX along the line the costs extend)."""
VERIFY_CONTEXT = 256
FILLER_TEXT = ("The sea was calm that morning, and the fishermen set out early to check "
               "their nets along the rocky coast before the wind came up. ")

ShouldStop = Callable[[], bool]


def contexts_for(needed: int, context_length: int) -> tuple[int, ...]:
    """The standard points, plus one past `needed` when a conversation outgrew them."""
    points = set(CONTEXTS)
    if needed > max(CONTEXTS):
        points.add(needed + 256)
    limit = context_length - STEPS - 2
    return tuple(sorted({min(p, limit) for p in points if p > 0}))


def step_costs(pair: Pair, prompt: list[int], params: SamplingParams, steps: int,
               should_stop: ShouldStop) -> tuple[float, float] | None:
    """(seconds per target-only token, seconds of its target forward) after `prompt`, timed
    over `steps` rounds after the first."""
    decoder = Decoder(pair.target, None, eos_ids=set())
    generator = torch.Generator(device=pair.target.device).manual_seed(0)
    metrics, detok = AnswerMetrics(prompt_tokens=len(prompt)), IncrementalDetokenizer(
        pair.tokenizer, prompt)
    for event in decoder.generate(prompt, Settings(0, params), steps + 1, generator, should_stop):
        if isinstance(event, Finished):
            break
        metrics.record(event)
        for token in event.committed:
            detok.push(token)
        metrics.snapshot()
    done = metrics.snapshot()
    if done.decode_tokens < steps or not done.target_forwards:
        return None  # stopped
    (_, rounds, _, forward_s), = done.target_forwards
    return done.decode_s / done.decode_tokens, forward_s / rounds


def measure_baseline(pair: Pair, params: SamplingParams, should_stop: ShouldStop = lambda: False,
                     contexts: Sequence[int] | None = None) -> Baseline | None:
    """The pair's target-only costs now, or None if it was stopped first."""
    started = time.perf_counter()
    seed = pair.tokenizer.encode(FILLER_TEXT)
    contexts = contexts or contexts_for(0, pair.context_length)
    step_costs(pair, filler_ids(seed, contexts[0]), params, 2, should_stop)  # warm-up
    points, forwards = [], []
    for length in contexts:
        step = step_costs(pair, filler_ids(seed, length), params, STEPS, should_stop)
        if step is None:
            return None
        points.append((length, step[0]))
        forwards.append((length, step[1]))
    try:
        costs = measure_baseline_costs(pair, should_stop=should_stop)
    except TimingStopped:
        return None  # a question came: it gets the model within one timed step
    return Baseline(params, tuple(points), costs, VERIFY_CONTEXT, time.time(),
                    time.perf_counter() - started, forward_points=tuple(forwards))


def measure_baseline_costs(pair: Pair, widths: Sequence[int] = VERIFY_WIDTHS, repeats: int = 3,
                           should_stop: ShouldStop = lambda: False) -> Costs:
    """One forward of each width and one draft step (the median of `repeats`), timed at
    `VERIFY_CONTEXT` tokens: the c and v(n) of the theory, and k = "auto"'s starting point
    (engine/adaptive.py). `TimingStopped` (engine/costs.py) where `should_stop` says so."""
    try:
        return measure_costs(pair.target, drafter_for(pair), baseline_costs_context(pair),
                             tuple(widths), repeats, no_drafter=None, should_stop=should_stop)
    finally:
        pair.target.reset()


def baseline_costs_context(pair: Pair) -> list[int]:
    """The `VERIFY_CONTEXT` filler tokens the pair's step costs are timed after."""
    return filler_ids(pair.tokenizer.encode(FILLER_TEXT), VERIFY_CONTEXT)


TIMING_COSTS = "timing step costs for k = auto"
"""The progress line while `start_auto_from_baseline` times the costs."""


def start_auto_from_baseline(pair: Pair, settings: Settings, costs: Costs | None = None,
                             progress: Callable[[str], None] = lambda _: None) -> Costs | None:
    """Hand a k = "auto" policy in `settings` the baseline's step costs before its first round
    (the policy's prior, engine/adaptive.py): `costs` if given, else the costs last timed for
    this pair on this machine (chat/remembered_costs.py), else timed now (2 s for the default
    pair on 2 cores, so before any answer's clock starts; `progress` says so) and
    remembered. Returns the costs in use (None where there is no adaptive policy or no
    draft)."""
    policy = settings.k_policy
    if not isinstance(policy, AdaptiveK) or not pair.has_draft:
        return costs
    if policy.has_prior:
        return policy.costs.prior
    costs = costs or remembered_costs(pair)
    if costs is None:
        progress(TIMING_COSTS)
        costs = measure_baseline_costs(pair)
        remember_costs(pair, costs)
    policy.use_prior(costs)
    return costs
