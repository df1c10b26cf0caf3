"""The transformers baselines `specchat bench` compares against: plain `generate`,
assisted generation with a draft model (`assistant_model=`), and prompt lookup
(`prompt_lookup_num_tokens=`) for an n-gram pair.

Token ids in, new token ids out, on the very models a `LoadedPair` holds. The
decoding settings mirror the engine's: greedy at temperature 0, else sampling with
the same `SamplingParams` (engine/params.py); the same EOS ids end the answer. Knows
nothing about timing or reports: the benchmark times the calls.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from specchat.engine.params import SamplingParams


@dataclass(frozen=True)
class BaselineSettings:
    """How a transformers baseline decodes one answer."""

    max_new_tokens: int
    eos_ids: tuple[int, ...]
    sampling: SamplingParams = SamplingParams()
    seed: int = 0


@dataclass(frozen=True)
class Speculation:
    """Which kind of transformers speculation to run (None fields: plain generate)."""

    assistant: Any = None
    """A transformers draft model for assisted generation."""
    lookup_tokens: int | None = None
    """prompt_lookup_num_tokens for n-gram prompt lookup."""
    draft_tokens: int = 4
    """num_assistant_tokens: drafts per round for an assistant model."""
    schedule: str = "constant"
    """num_assistant_tokens_schedule: constant, heuristic or heuristic_transient."""
    confidence_threshold: float | None = 0.0
    """assistant_confidence_threshold: 0 drafts every one of `draft_tokens` (the fixed k a
    comparison with specchat's k needs); None keeps transformers' own (it stops drafting
    where the draft's confidence falls below it)."""
    ngram_size: int = 2
    """max_matching_ngram_size for prompt lookup."""


def sampling_kwargs(sampling: SamplingParams) -> dict:
    """generate() keywords that match the engine's processing of the same SamplingParams."""
    if sampling.greedy:
        return {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    return {"do_sample": True, "temperature": sampling.temperature,
            "top_p": sampling.top_p, "top_k": sampling.top_k or None}


def speculation_kwargs(spec: Speculation | None) -> dict:
    if spec is None:
        return {}
    if spec.lookup_tokens is not None:
        return {"prompt_lookup_num_tokens": spec.lookup_tokens,
                "max_matching_ngram_size": spec.ngram_size}
    if spec.assistant is None:
        return {}
    return {"assistant_model": spec.assistant}


@contextmanager
def assistant_settings(spec: Speculation | None):
    """The draft length, schedule and confidence threshold set where transformers reads them:
    the assistant's own generation config (given to `generate` they are ignored, and it
    drafts 20 tokens a round cut short at confidence 0.4). Restored afterwards."""
    if spec is None or spec.assistant is None:
        yield
        return
    config = spec.assistant.generation_config
    wanted = {"num_assistant_tokens": spec.draft_tokens,
              "num_assistant_tokens_schedule": spec.schedule}
    if spec.confidence_threshold is not None:
        wanted["assistant_confidence_threshold"] = spec.confidence_threshold
    before = {key: getattr(config, key, None) for key in wanted}
    for key, value in wanted.items():
        setattr(config, key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            setattr(config, key, value)


@torch.inference_mode()
def hf_generate(model, prompt: list[int], settings: BaselineSettings,
                speculation: Speculation | None = None) -> list[int]:
    """New token ids from `model.generate` (plain, assisted or prompt lookup)."""
    device = next(model.parameters()).device
    ids = torch.tensor([prompt], dtype=torch.long, device=device)
    if not settings.sampling.greedy:
        torch.manual_seed(settings.seed)
    with assistant_settings(speculation):
        output = model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids),
            max_new_tokens=settings.max_new_tokens, eos_token_id=list(settings.eos_ids),
            pad_token_id=settings.eos_ids[0], use_cache=True,
            **sampling_kwargs(settings.sampling), **speculation_kwargs(speculation))
    return output[0, len(prompt):].tolist()


def quiet_generation_warnings() -> None:
    """transformers warns about generation flags on every call; the benchmark knows."""
    from transformers.utils import logging

    logging.set_verbosity_error()
