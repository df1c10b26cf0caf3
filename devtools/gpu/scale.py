"""`python -m devtools scale`: measurements at real scale on random weights with the shapes of
Llama-3.2-1B and Llama-3.1-8B (nothing downloaded), in bfloat16, 8-bit and 4-bit. One JSON
object per measurement, appended to --out and echoed to stdout:

- copy: a device-to-device copy's bandwidth (bytes read + written per second), the
  ceiling the decode bandwidth is compared with;
- model: per shape and quantization, weight bytes and GPU memory, the forward the chat
  would run (specchat's own static forward with its CUDA graph capture time: every width
  at the attention spans the timing reaches, 256 and 512 tokens, not all up to 4,096 as
  until the first GPU run; or why capture failed; transformers' eager forward for 8-bit
  and 4-bit weights),
  step time and verify cost v(n) for every fixed k's k + 1 (engine.costs.WIDTHS), and
  target-only decode bandwidth (weight bytes read per token / time per token) as a share
  of the copy's;
- spec: the 8B target decoding alone, with a self-draft sharing its weights (α = 1:
  bounds the engine's overhead) and with the 1B draft (random weights: α ≈ 0, its cost
  alone), each beside what the cost model (engine.theory) predicts from the measured c
  and v (engine.costs.Costs) and α (the engine's SpecStats: acceptance events per tested
  position), plus the prediction and best k at α = 0.6, 0.7, 0.8;
- syncs: host synchronisations per round of speculative decoding (CUDA's sync debug
  mode counts them; the design allows one).

`--tiny --device cpu` runs every part with tiny shapes on the CPU in seconds (quantization
needs CUDA and is recorded as skipped there). Measurements fail one at a time: an error is
recorded in its object and the rest go on. Timing, c and v(n) come from engine.costs, α
from engine.stats, predictions from engine.theory; this module only orchestrates and records.
"""

from __future__ import annotations

import gc
import json
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

import torch

from specchat.engine.costs import WIDTHS, Costs, median_seconds, synchronize, verify_costs
from specchat.engine.theory import best_k, measured_speedup, speedup_at

ALPHAS = (0.6, 0.7, 0.8)
DRAFT, TARGET = "1b", "8b"


@dataclass(frozen=True)
class ScaleSettings:
    """What `scale` measures and how long it may take."""

    device: str
    tiny: bool = False
    shapes: tuple[str, ...] = (DRAFT, TARGET)
    quantizations: tuple[str, ...] = ("none", "8bit", "4bit")
    k: int = 4
    tokens: int = 128
    repeats: int = 10
    budget_s: float = 500.0

    @property
    def widths(self) -> tuple[int, ...]:
        """Verify widths timed: engine.costs.WIDTHS, or just 1..k+1 for a tiny dry run."""
        return tuple(range(1, self.k + 2)) if self.tiny else WIDTHS

    @property
    def dtype(self) -> torch.dtype:
        """bfloat16 as on a GPU; float32 for a tiny dry run (bf16 is emulated on many CPUs)."""
        return torch.float32 if self.tiny else torch.bfloat16

    @property
    def context(self) -> int:
        return 64 if self.tiny else 256


@dataclass
class Recorder:
    """Where records go, which device they are from, and the time left."""

    settings: ScaleSettings
    out: TextIO
    device_name: str
    command: str
    echo: Callable[[str], None] = print
    started: float = field(default_factory=time.perf_counter)

    def left(self) -> float:
        return self.settings.budget_s - (time.perf_counter() - self.started)

    def emit(self, kind: str, **figures: Any) -> dict:
        record = {"kind": kind, "device": self.device_name, "command": self.command, **figures}
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()
        self.echo(json.dumps(record)[:400])
        return record

    def guarded(self, kind: str, function: Callable, **labels: Any):
        """Run one measurement; record its error instead of stopping the run."""
        if self.left() < 15 and not self.settings.tiny:
            self.emit(kind, skipped="time budget spent", **labels)
            return None
        try:
            return function()
        except Exception as error:  # noqa: BLE001 - one failed measurement costs only itself
            self.emit(kind, error=f"{type(error).__name__}: {error}"[:500],
                      trace=traceback.format_exc()[-1500:], **labels)
            return None


@dataclass(frozen=True)
class Measured:
    """One built model, the figures recorded about it, and its timed step costs."""

    model: Any
    figures: dict
    costs: Costs


def copy_bandwidth(device: str, nbytes: int) -> float:
    """Bytes read + written per second by a device-to-device copy (median of 20)."""
    source = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=device).normal_()
    target = torch.empty_like(source)
    seconds = median_seconds(lambda: target.copy_(source), 20, torch.device(device))
    return 2 * nbytes / seconds


def static_model(model: Any, buckets: bool, max_length: int = 1024):
    """specchat's own static forward; on CUDA its steps are captured as CUDA graphs."""
    from specchat.models.torch_backend.adapter import static_adapter

    return static_adapter(model, max_length=max_length, buckets=buckets)


PROMPT_TOKENS = 128
"""The speculative runs' prompt."""


def round_ready(model: Any, k: int, tokens: int):
    """specchat's static forward with every width a round of k drafts runs captured at every
    attention span an answer of `tokens` after the prompt reaches (`prepare`), so no capture
    lands inside a timed answer."""
    adapter = static_model(model, buckets=True)
    adapter.prepare(widths=k + 1, longest=PROMPT_TOKENS + tokens + k + 1)
    return adapter


def measured_adapter(model: Any, quantization: str):
    """The forward the chat runs for these weights (models.torch_backend.adapter chooses):
    specchat's own static forward, or transformers' eager one for quantized weights, which
    neither static forward takes."""
    if quantization == "none":
        return static_model(model, buckets=False)
    from specchat.models.torch_backend.adapter import torch_adapter

    return torch_adapter(model, str(model.device), quantized=True)[0]


def allocated(device: str) -> int:
    return torch.cuda.memory_allocated() if device.startswith("cuda") else 0


def measure_model(recorder: Recorder, shape: str, quantization: str) -> Measured:
    """Build one model and time its steps."""
    from specchat.models.torch_backend.synthetic import bytes_per_token, quantize, random_llama

    settings, device = recorder.settings, recorder.settings.device
    before, started = allocated(device), time.perf_counter()
    model, _ = random_llama(shape, device, settings.dtype, tiny=settings.tiny)
    if quantization != "none":
        quantize(model, quantization)
    built_s = time.perf_counter() - started
    adapter = measured_adapter(model, quantization)
    started = time.perf_counter()
    if hasattr(adapter, "prepare"):  # a static forward: on CUDA every width is captured
        adapter.prepare(widths=max(settings.widths),
                        longest=settings.context + max(settings.widths))
    context = [(1000 + i) % adapter.vocab_size for i in range(settings.context)]
    costs = Costs.of(verify_costs(adapter, context, settings.widths, repeats=settings.repeats),
                     None)
    timed = costs.report()
    figures = {"shape": shape, "quant": quantization, "tiny": settings.tiny,
               "layers": model.config.num_hidden_layers,
               "weight_bytes_per_token": bytes_per_token(model),
               "gpu_memory_bytes": (allocated(device) - before) or None,
               "build_s": round(built_s, 2), "measure_s": round(time.perf_counter() - started, 2),
               "forward": type(adapter).__name__,
               "captured": bool(getattr(adapter, "compiled", False)),
               "capture_s": round(getattr(adapter, "capture_s", 0.0), 3),
               "compile_error": getattr(adapter, "compile_error", None),
               "step_ms": timed["target_step_ms"],
               "verify_ms": timed["verify_ms"], "v": timed["v"]}
    figures["bandwidth_bytes_per_s"] = figures["weight_bytes_per_token"] / costs.target_step_s
    return Measured(model, figures, costs)


def decode_rate(target: Any, drafter: Any, k: int, prompt: list[int], tokens: int):
    """(tokens/s, α, rounds) of one greedy answer, after a warm-up answer; α is the engine's
    own (SpecStats.alpha: accepted / tested draft positions), None where nothing was drafted."""
    from specchat.engine import Decoder, Finished, SamplingParams, Settings, SpecStats

    decoder = Decoder(target, drafter, eos_ids=set(), check_invariants=False)
    settings = Settings(k, SamplingParams())
    list(decoder.generate(prompt, settings, 16))
    synchronize(target.device)
    started = time.perf_counter()
    rounds = [e for e in decoder.generate(prompt, settings, tokens) if not isinstance(e, Finished)]
    synchronize(target.device)
    seconds, stats = time.perf_counter() - started, SpecStats()
    for event in rounds:  # counted after the clock stopped
        stats.update(event)
    return stats.tokens / seconds, stats.alpha, stats.rounds


def count_syncs(target: Any, drafter: Any, k: int, prompt: list[int],
                rounds: int = 8) -> tuple[float, dict[str, int]] | tuple[None, None]:
    """Host synchronisations per round, counted by CUDA's sync debug mode, and where they were
    made ("file.py:line": count); (None, None) off CUDA."""
    from specchat.engine import Decoder, SamplingParams, Settings
    from specchat.engine.host_syncs import by_place, host_syncs

    if target.device.type != "cuda":
        return None, None
    decoder = Decoder(target, drafter, eos_ids=set(), check_invariants=False)
    events = decoder.generate(prompt, Settings(k, SamplingParams()), 10_000)
    next(events)  # the prompt's round, outside the count
    with host_syncs() as places:
        for _ in range(rounds):
            next(events)
    return len(places) / rounds, by_place(places)


def syncs_record(target: Any, drafter: Any, k: int, prompt: list[int]) -> dict:
    per_round, places = count_syncs(target, drafter, k, prompt)
    return {"syncs_per_round": per_round, "sync_places": places}


def draft_c(costs: Costs) -> float:
    """c of costs that price a drafter's step (every spec measurement here does)."""
    if costs.c is None:
        raise ValueError("these costs price no draft step")
    return costs.c


def predictions(costs: Costs, k: int) -> dict:
    """The cost model at the assumed α values: speedup at k, and the best k."""
    k_max, c = max(costs.widths) - 1, draft_c(costs)
    return {"predicted_at": {str(a): speedup_at(a, k, c, costs.v) for a in ALPHAS},
            "best_k_at": {str(a): best_k(a, c, costs.v, k_max=k_max)[0] for a in ALPHAS}}


def predicted(alpha: float | None, k: int, costs: Costs) -> float | None:
    """The cost model's speedup at the measured α (None where no draft was tested)."""
    return None if alpha is None else speedup_at(alpha, k, draft_c(costs), costs.v)


def speculative_runs(recorder: Recorder, target: Measured, draft: Measured | None) -> None:
    """Target-only, self-draft (α = 1) and the 1B draft, each beside the cost model: c is a
    drafter's one-token step over the target's (the self-draft's step is the target's own)."""
    from specchat.engine import ModelDrafter

    k, tokens = recorder.settings.k, recorder.settings.tokens
    model = round_ready(target.model, k, tokens)
    prompt = [(7 * i + 3) % model.vocab_size for i in range(PROMPT_TOKENS)]
    alone = decode_rate(model, None, 0, prompt, tokens)[0]
    costs = Costs.of(target.costs.verify_s, target.costs.target_step_s)
    self_draft = ModelDrafter(round_ready(target.model, k, tokens))
    rate, alpha, _ = decode_rate(model, self_draft, k, prompt, tokens)
    recorder.emit("spec", target=target.figures["shape"], draft="self (shares the target's weights)",
                  k=k, target_only_tok_s=alone, spec_tok_s=rate,
                  measured_speedup=measured_speedup(rate, alone), alpha=alpha, c=costs.c,
                  v=costs.v(k + 1), predicted_speedup=predicted(alpha, k, costs))
    if draft is None:
        return
    costs = Costs.of(target.costs.verify_s, draft.costs.target_step_s)
    drafter = ModelDrafter(round_ready(draft.model, k, tokens))
    rate, alpha, _ = decode_rate(model, drafter, k, prompt, tokens)
    recorder.emit("spec", target=target.figures["shape"], draft=draft.figures["shape"], k=k,
                  target_only_tok_s=alone, spec_tok_s=rate,
                  measured_speedup=measured_speedup(rate, alone), alpha=alpha, c=costs.c,
                  v=costs.v(k + 1), predicted_at_measured_alpha=predicted(alpha, k, costs),
                  **syncs_record(model, drafter, k, prompt),
                  **predictions(costs, k))


def free(*objects: object) -> None:
    del objects
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def measure_quantization(recorder: Recorder, quantization: str, bandwidth: float | None) -> None:
    """Every shape at one quantization, then (unquantized) the speculative runs."""
    settings, models = recorder.settings, {}
    if quantization != "none" and not settings.device.startswith("cuda"):
        recorder.emit("model", quant=quantization, skipped="bitsandbytes needs CUDA")
        return
    for shape in settings.shapes:
        measured = recorder.guarded("model", lambda: measure_model(recorder, shape, quantization),
                                    shape=shape, quant=quantization)
        if measured is None:
            continue
        if bandwidth:
            measured.figures["bandwidth_share_of_copy"] = (measured.figures["bandwidth_bytes_per_s"]
                                                           / bandwidth)
        recorder.emit("model", **measured.figures)
        models[shape] = measured
    if quantization == "none" and TARGET in models:
        recorder.guarded("spec", lambda: speculative_runs(recorder, models[TARGET],
                                                          models.get(DRAFT)))
    free(models)


def run_scale(settings: ScaleSettings, out: TextIO, command: str,
              echo: Callable[[str], None] = print) -> None:
    """Every measurement of the module's docstring, appended to `out` as JSON lines."""
    from specchat.bench.modes import device_name

    recorder = Recorder(settings, out, device_name(settings.device), command, echo)
    copy_bytes = (1 << 20) if settings.tiny else (2 << 30)
    bandwidth = recorder.guarded("copy", lambda: copy_bandwidth(settings.device, copy_bytes))
    if bandwidth:
        recorder.emit("copy", bytes=copy_bytes, bandwidth_bytes_per_s=bandwidth)
    for quantization in settings.quantizations:
        measure_quantization(recorder, quantization, bandwidth)
