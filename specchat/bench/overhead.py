"""`bench overhead`: how much of a round is spent outside the model forwards.

Both models are wrapped in `TimedModel`, which brackets every forward with timers:
CUDA events on a GPU (no extra synchronisation inside the round; read once per
answer) and the wall clock on a CPU. The answer's wall time minus the time inside
forwards is the loop's own cost: drafting logic, verification, sampling, cache
bookkeeping, host synchronisation, Python. Optionally a torch.profiler table of
the busiest operators is kept too. Knows nothing about transformers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from specchat.chat.decoding import decoder_for
from specchat.engine import Finished
from specchat.engine.costs import synchronize

if TYPE_CHECKING:
    from specchat.chat.pair import Pair
    from specchat.engine.decoder import Settings


class TimedModel:
    """A `CausalModel` that records how long each forward takes; otherwise the model itself."""

    def __init__(self, model: Any):
        self.inner = model
        self.vocab_size, self.device = model.vocab_size, model.device
        self.spans: list = []

    @property
    def cache_length(self) -> int:
        return self.inner.cache_length

    def crop(self, length: int) -> None:
        self.inner.crop(length)

    def reset(self) -> None:
        self.inner.reset()

    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        if self.device.type != "cuda":
            started = time.perf_counter()
            out = self.inner.forward(ids, keep)
            self.spans.append(time.perf_counter() - started)
            return out
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = self.inner.forward(ids, keep)
        end.record()
        self.spans.append((start, end))
        return out

    def take_seconds(self) -> float:
        """Seconds spent in forwards since the last call (synchronises once on CUDA)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            total = sum(s.elapsed_time(e) for s, e in self.spans) / 1000
        else:
            total = sum(self.spans)
        self.spans = []
        return total


@dataclass
class OverheadResult:
    rounds: int = 0
    tokens: int = 0
    wall_s: float = 0.0
    forward_s: float = 0.0

    def as_dict(self) -> dict:
        outside = self.wall_s - self.forward_s
        return {"rounds": self.rounds, "tokens": self.tokens, "wall_s": round(self.wall_s, 4),
                "forward_s": round(self.forward_s, 4),
                "ms_per_round": 1000 * self.wall_s / max(self.rounds, 1),
                "forward_ms_per_round": 1000 * self.forward_s / max(self.rounds, 1),
                "outside_forward_share": outside / self.wall_s if self.wall_s else None}


def measure_overhead(pair: Pair, settings: Settings, prompts: list[list[int]], max_new_tokens: int,
                     speculate: bool = True) -> OverheadResult:
    """Decode every prompt with timed models; sum wall time and time inside forwards."""
    timed: dict[int, TimedModel] = {}

    def wrap(model: Any) -> TimedModel:
        if id(model) not in timed:
            timed[id(model)] = TimedModel(model)
        return timed[id(model)]

    result = OverheadResult()
    for ids in prompts:
        decoder = decoder_for(pair, speculate, wrap, settings)
        synchronize(pair.target.device)
        started = time.perf_counter()
        for event in decoder.generate(ids, settings, max_new_tokens):
            if isinstance(event, Finished):
                break
            result.rounds += 1
            result.tokens += len(event.committed)
        forward = sum(model.take_seconds() for model in timed.values())
        result.wall_s += time.perf_counter() - started  # take_seconds synchronised the device
        result.forward_s += forward
    return result


def profiler_table(pair: Pair, settings: Settings, ids: list[int], max_new_tokens: int,
                   rows: int = 20) -> str:
    """torch.profiler's busiest operators for one speculative answer."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if pair.target.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        for _ in decoder_for(pair, settings=settings).generate(ids, settings, max_new_tokens):
            pass
    key = "self_cuda_time_total" if len(activities) > 1 else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=rows)
