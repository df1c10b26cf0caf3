"""The round's stopwatch: how much of a round went to drafting and how much to verifying.

On a CPU every forward runs when it is called, so the host's clock read at three marks
(round start, drafts ready, verdict read) splits a round. On a CUDA device a call only
queues work: the host reaches "drafts ready" once the draft's kernels are launched, and
the round's one host sync (reading the verdict) then waits for the draft and the verify
alike, so the host's marks put nearly all of the draft's time into the verify. k = "auto"
learns its draft cost from these times (engine/adaptive.py): on the first GPU run it
priced drafting near zero, each untried wide k looked cheap, and it tried k = 5 to 16 in
turn where k = 3 paid best (docs/benchmarks.md, GPU).

So on a CUDA device the drafts-ready mark is a device event recorded on the stream after
the draft's work, read once the round's sync has completed it (reading a completed event
waits for nothing, so the round still syncs the host once). The round's whole time stays
the host's wall clock, what an answer's tokens per second are made of; the events only
say where inside it the draft ended. The events are on the target's device: a draft on
another GPU is not on that stream (its time would again count as the verify's).

Knows nothing about models, tokens or rounds' contents.
"""

from __future__ import annotations

import time
from typing import Callable, Protocol

import torch

Clock = Callable[[], float]


class RoundClock(Protocol):
    """Marks a round's start and its drafts being ready; then, after the round's host sync,
    says how long each part took."""

    def start(self) -> None: ...

    def drafted(self) -> None: ...

    def split(self) -> tuple[float, float]:
        """(draft seconds, verify seconds); call after the round's verdict was read."""
        ...


class HostClock:
    """A round on a device that runs each call before returning (a CPU): the host's marks."""

    def __init__(self, clock: Clock | None = None):
        self.clock = clock or time.perf_counter
        self._started = self._drafted = 0.0

    def start(self) -> None:
        self._started = self.clock()

    def drafted(self) -> None:
        self._drafted = self.clock()

    def split(self) -> tuple[float, float]:
        return self._drafted - self._started, self.clock() - self._drafted


class StreamMark(Protocol):
    """A point on a device's queue of work (a `torch.cuda.Event` with timing)."""

    def record(self) -> None: ...

    def elapsed_time(self, end: "StreamMark") -> float | None:
        """Milliseconds from this mark to `end` on the device; None while either has not
        completed (the round's sync is on another stream: the host's marks stand in)."""
        ...


class DeviceClock(HostClock):
    """A round on a device that queues work (CUDA): the host's clock for the whole round, two
    stream marks for where the draft ended in it (the host's marks where they are pending)."""

    def __init__(self, mark: Callable[[], StreamMark], clock: Clock | None = None):
        super().__init__(clock)
        self._start_mark, self._draft_mark = mark(), mark()

    def start(self) -> None:
        super().start()
        self._start_mark.record()

    def drafted(self) -> None:
        super().drafted()
        self._draft_mark.record()

    def split(self) -> tuple[float, float]:
        on_stream = self._start_mark.elapsed_time(self._draft_mark)
        if on_stream is None:
            return super().split()
        whole = self.clock() - self._started
        draft = min(whole, max(0.0, on_stream / 1000))
        return draft, whole - draft


class CudaMark:
    """A timing event on the current stream of one CUDA device."""

    def __init__(self, device: torch.device):
        self.device = device
        self.event = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]

    def record(self) -> None:
        self.event.record(torch.cuda.current_stream(self.device))

    def elapsed_time(self, end: StreamMark) -> float | None:
        assert isinstance(end, CudaMark)
        done = self.event.query() and end.event.query()  # type: ignore[no-untyped-call]
        if not done:  # a query waits for nothing
            return None
        return float(self.event.elapsed_time(end.event))


def round_clock(device: torch.device) -> RoundClock:
    """The stopwatch for rounds whose forwards run on `device`."""
    if device.type == "cuda":
        return DeviceClock(lambda: CudaMark(device))
    return HostClock()
