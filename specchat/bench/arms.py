"""The contenders of a benchmark run, each answering one prompt's ids with new ids.

- `SpecchatArm`: the engine's `Decoder` over the pair's target and drafter
  (speculative) or the target alone (k = 0), exactly what `specchat run` decodes.
- `TransformersArm`: `generate` on the same model objects, plain or with
  transformers' own speculation (assistant model, or prompt lookup for `ngram`).

An arm returns an `ArmRun`: the new token ids and the wall time of the whole
answer (prefill included, identically for every arm). Knows nothing about
reports or prompt files.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import torch

from specchat.engine import Decoder, Finished, NgramDrafter, SamplingParams, Settings


@dataclass
class ArmRun:
    """One answer of one arm."""

    tokens: list[int]
    seconds: float
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    ks: tuple[int, ...] = ()
    """The draft length each round asked for (specchat arms only)."""

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds > 0 else 0.0


class Arm(Protocol):
    key: str
    label: str
    speculative: bool

    def run(self, prompt: list[int], max_new_tokens: int) -> ArmRun: ...


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class SpecchatArm:
    """specchat's own decoding loop, speculative or target-only."""

    def __init__(self, key: str, label: str, pair, settings: Settings, speculate: bool,
                 seed: int = 0, policy_factory=None):
        self.key, self.label, self.pair = key, label, pair
        self.settings = settings
        self.speculative = speculate and pair.drafter is not None
        self.seed = seed
        self.policy_factory = policy_factory
        """Builds a fresh k policy per answer (k = "auto"); None keeps settings.k."""

    def decoder(self) -> Decoder:
        drafter = self.pair.drafter if self.speculative else None
        return Decoder(self.pair.target, drafter, self.pair.eos_ids)

    def run(self, prompt: list[int], max_new_tokens: int) -> ArmRun:
        device = self.pair.target.device
        generator = torch.Generator(device=device).manual_seed(self.seed)
        settings = self.answer_settings()
        result = ArmRun([], 0.0)
        ks: list[int] = []
        synchronize(device)
        started = time.perf_counter()
        for event in self.decoder().generate(prompt, settings, max_new_tokens, generator):
            if isinstance(event, Finished):
                break
            result.tokens.extend(event.committed)
            result.rounds += 1
            result.drafted += event.drafted
            result.accepted += len(event.accepted)
            ks.append(event.k)
        synchronize(device)
        result.seconds = time.perf_counter() - started
        result.ks = tuple(ks)
        return result

    def answer_settings(self) -> Settings:
        if not self.speculative:
            return Settings(0, self.settings.sampling)
        if self.policy_factory is None:
            return self.settings
        return Settings(self.settings.k, self.settings.sampling, self.policy_factory())


class TransformersArm:
    """transformers `generate` on the pair's own model objects."""

    def __init__(self, key: str, label: str, pair, sampling: SamplingParams, seed: int = 0,
                 speculation=None):
        self.key, self.label, self.pair = key, label, pair
        self.sampling, self.seed = sampling, seed
        self.speculation = speculation
        self.speculative = speculation is not None

    def run(self, prompt: list[int], max_new_tokens: int) -> ArmRun:
        from specchat.models.baselines import BaselineSettings, hf_generate

        settings = BaselineSettings(max_new_tokens, tuple(sorted(self.pair.eos_ids)),
                                    self.sampling.temperature, self.sampling.top_k,
                                    self.sampling.top_p, self.seed)
        device = self.pair.target.device
        synchronize(device)
        started = time.perf_counter()
        tokens = hf_generate(self.pair.target.model, prompt, settings, self.speculation)
        synchronize(device)
        return ArmRun(tokens, time.perf_counter() - started)


def transformers_speculation(pair, k: int, schedule: str = "constant"):
    """transformers' counterpart of the pair's drafter, or None for a plain pair."""
    from specchat.models.baselines import Speculation

    if isinstance(pair.drafter, NgramDrafter):
        return Speculation(lookup_tokens=k, ngram_size=pair.drafter.max_ngram)
    if pair.draft_model is not None:
        return Speculation(assistant=pair.draft_model.model, draft_tokens=k, schedule=schedule)
    return None


def standard_arms(pair, settings: Settings, seed: int = 0) -> list[Arm]:
    """The four contenders of issue 2: spec, target-only, generate, transformers' speculation."""
    arms: list[Arm] = [
        SpecchatArm("spec", "specchat speculative", pair, settings, True, seed),
        SpecchatArm("target", "specchat target-only", pair, settings, False, seed),
        TransformersArm("hf", "transformers generate", pair, settings.sampling, seed),
    ]
    speculation = transformers_speculation(pair, max(settings.k, 1))
    if speculation is not None:
        label = ("transformers prompt lookup" if speculation.lookup_tokens is not None
                 else "transformers assisted")
        arms.append(TransformersArm("hf_spec", label, pair, settings.sampling, seed, speculation))
    return arms
