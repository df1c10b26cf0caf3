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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Sequence

import torch

from specchat.chat.baseline_timing import start_auto_from_baseline
from specchat.chat.decoding import decoder_for
from specchat.engine import Decoder, Finished, SamplingParams, Settings, SpecStats
from specchat.engine.costs import synchronize

if TYPE_CHECKING:
    from specchat.chat.pair import Pair


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
    drafting_rounds: int = 0
    """Rounds that drafted at least one token (n-gram lookup finds no match in the others)."""
    full_rounds: int = 0
    """Rounds that drafted the arm's full k (fixed-k arms): the rounds τ = E(α, k) describes."""
    full_tokens: int = 0
    """Tokens committed by those rounds."""
    stats: SpecStats = field(default_factory=SpecStats)
    """The engine's statistics of the answer (specchat arms only): acceptance events per position."""
    inside_llama_s: float | None = None
    """Seconds the answer spent inside llama.cpp's decode calls, where every model of the arm
    runs on llama.cpp (specchat arms only); the rest of `seconds` is specchat's own work."""
    count: int | None = None
    """Tokens a program reported producing where their ids are not known (llama.cpp's own
    programs, run as processes): `tokens` is then empty and no text is compared."""

    @property
    def token_count(self) -> int:
        return len(self.tokens) if self.count is None else self.count

    @property
    def ids_known(self) -> bool:
        return self.count is None

    @property
    def tokens_per_s(self) -> float:
        return self.token_count / self.seconds if self.seconds > 0 else 0.0


class Arm(Protocol):
    key: str
    label: str
    speculative: bool

    def run(self, prompt: list[int], max_new_tokens: int) -> ArmRun: ...


class SpecchatArm:
    """specchat's own decoding loop, speculative or target-only."""

    def __init__(self, key: str, label: str, pair: Pair, settings: Settings, speculate: bool,
                 seed: int = 0):
        self.key, self.label, self.pair = key, label, pair
        self.settings = settings
        """Kept across answers, so an adaptive k policy learns over the run as in a chat."""
        self.speculative = speculate and pair.has_draft
        self.seed = seed

    def decoder(self) -> Decoder:
        return decoder_for(self.pair, self.speculative, settings=self.settings)

    def run(self, prompt: list[int], max_new_tokens: int) -> ArmRun:
        device = self.pair.target.device
        generator = torch.Generator(device=device).manual_seed(self.seed)
        settings = self.settings if self.speculative else Settings(0, self.settings.sampling)
        if self.speculative:  # k = "auto" starts from timed step costs, as in a chat
            start_auto_from_baseline(self.pair, settings)
        result = ArmRun([], 0.0)
        ks: list[int] = []
        llama = self.llama_models()
        inside = sum(model.decode_s for model in llama)
        synchronize(device)
        started = time.perf_counter()
        for event in self.decoder().generate(prompt, settings, max_new_tokens, generator):
            if isinstance(event, Finished):
                break
            result.tokens.extend(event.committed)
            result.stats.update(event)
            result.rounds += 1
            result.drafted += event.drafted
            result.accepted += len(event.accepted)
            if event.drafted:
                result.drafting_rounds += 1
            if event.drafted and event.drafted == settings.k:  # not cut by budget, EOS or lookup
                result.full_rounds += 1
                result.full_tokens += len(event.committed)
            ks.append(event.k)
        synchronize(device)
        result.seconds = time.perf_counter() - started
        result.ks = tuple(ks)
        if llama:
            result.inside_llama_s = sum(model.decode_s for model in llama) - inside
        return result

    def llama_models(self) -> list:
        """The arm's models when every one runs on llama.cpp (each counts its time inside
        `llama_decode`), else none: a torch model's time is no time outside llama.cpp."""
        draft = self.pair.draft_model if self.speculative else None
        models = [m for m in (self.pair.target, draft) if m is not None]
        return models if all(hasattr(m, "decode_s") for m in models) else []


class TransformersArm:
    """transformers `generate` on the pair's own model objects."""

    def __init__(self, key: str, label: str, pair: Pair, sampling: SamplingParams,
                 seed: int = 0, speculation: Any = None):
        self.key, self.label, self.pair = key, label, pair
        self.sampling, self.seed = sampling, seed
        self.speculation = speculation
        self.speculative = speculation is not None

    def run(self, prompt: list[int], max_new_tokens: int) -> ArmRun:
        from specchat.models.torch_backend.baselines import BaselineSettings, hf_generate

        settings = BaselineSettings(max_new_tokens, tuple(sorted(self.pair.eos_ids)),
                                    self.sampling, self.seed)
        device = self.pair.target.device
        synchronize(device)
        started = time.perf_counter()
        tokens = hf_generate(self.pair.target.model, prompt, settings, self.speculation)
        synchronize(device)
        return ArmRun(tokens, time.perf_counter() - started)


EAGER = "(eager, dynamic cache)"
"""How transformers' arms run: `generate` as it ships, with neither a static cache nor
torch.compile, while specchat's own forward may be captured as CUDA graphs; the labels say so."""


def transformers_speculation(pair: Pair, k: int, schedule: str = "constant"):
    """transformers' counterpart of the pair's drafter, or None for a plain pair: k drafts a
    round on the constant schedule; the heuristic schedules keep transformers' own
    confidence cut (they are transformers' adaptive speculation, as it ships)."""
    from specchat.models.torch_backend.baselines import Speculation

    if hasattr(pair.draft, "max_ngram"):  # an n-gram lookup
        return Speculation(lookup_tokens=k, ngram_size=pair.draft.max_ngram)
    if hasattr(pair.draft_model, "model"):  # a torch draft (a llama.cpp one has no transformers model)
        return Speculation(assistant=pair.draft_model.model, draft_tokens=k, schedule=schedule,
                           confidence_threshold=0.0 if schedule == "constant" else None)
    return None


def standard_arms(pair: Pair, settings: Settings, seed: int = 0) -> list[Arm]:
    """The four contenders of issue 2: spec, target-only, generate, transformers' speculation."""
    arms: list[Arm] = [
        SpecchatArm("spec", "specchat speculative", pair, settings, True, seed),
        SpecchatArm("target", "specchat target-only", pair, settings, False, seed),
    ]
    if not hasattr(pair.target, "model"):  # a llama.cpp target: no transformers model to run
        return arms
    arms.append(TransformersArm("hf", f"transformers generate {EAGER}", pair, settings.sampling,
                                seed))
    speculation = transformers_speculation(pair, max(settings.k, 1))
    if speculation is not None:
        label = ("transformers prompt lookup" if speculation.lookup_tokens is not None
                 else f"transformers assisted, k={speculation.draft_tokens}") + f" {EAGER}"
        arms.append(TransformersArm("hf_spec", label, pair, settings.sampling, seed, speculation))
    return arms


def sweep_arms(pair: Pair, sampling: SamplingParams, ks: Sequence[int], seed: int = 0,
               auto: bool = True) -> list[Arm]:
    """Target-only, specchat at each fixed k, k = "auto", and transformers' heuristic schedule."""
    from specchat.engine.adaptive import settings_for

    arms: list[Arm] = [SpecchatArm("target", "specchat target-only", pair, Settings(0, sampling),
                                   False, seed)]
    arms += [SpecchatArm(f"k{k}", f"specchat k={k}", pair, Settings(k, sampling), True, seed)
             for k in ks]
    if auto:
        arms.append(SpecchatArm("auto", "specchat k=auto", pair,
                                settings_for("auto", sampling), True, seed))
    heuristic = transformers_speculation(pair, 4, schedule="heuristic_transient")
    if heuristic is not None and heuristic.assistant is not None and hasattr(pair.target, "model"):
        arms.append(TransformersArm("hf_heuristic",
                                    f"transformers assisted, heuristic schedule {EAGER}",
                                    pair, sampling, seed, heuristic))
    return arms
