"""A round's draft and verify times on a device that queues work (engine/round_clock.py).

On CUDA a forward only queues kernels, and the round's one host sync (reading the verdict)
waits for the draft and the verify alike. The first GPU run timed rounds with the host's
clock alone: drafting looked free, k = "auto" tried every wide k in turn and ran at half
the best fixed k's speed. `QueueingDevice` plays such a device on the CPU: calls return
at once, the queue runs at the models' stated costs, and marks on the queue say when the
work before them ended, as CUDA's timing events do.
"""

from __future__ import annotations

import torch

from specchat.engine import Decoder, ModelDrafter, Round, SamplingParams, Settings
from specchat.engine.adaptive import AdaptiveK
from specchat.engine.costs import Costs
from specchat.engine.round_clock import DeviceClock, HostClock, round_clock
from toy import TableModel

LAUNCH_S = 1e-4
"""Host seconds to queue one forward (a CUDA graph's launch)."""


class QueueingDevice:
    """Host and device clocks of a device whose calls queue work and return at once."""

    def __init__(self):
        self.host = 0.0
        self.queue_ends = 0.0

    def queue(self, seconds: float) -> None:
        self.queue_ends = max(self.queue_ends, self.host) + seconds
        self.host += LAUNCH_S

    def sync(self) -> None:
        self.host = max(self.host, self.queue_ends)

    def perf_counter(self) -> float:
        return self.host

    def mark(self) -> "QueueMark":
        return QueueMark(self)


class QueueMark:
    """A timing event: it completes when the work queued before it has run."""

    def __init__(self, device: QueueingDevice):
        self.device, self.at = device, 0.0

    def record(self) -> None:
        self.at = max(self.device.queue_ends, self.device.host)

    def elapsed_time(self, end: "QueueMark") -> float:
        return (end.at - self.at) * 1000


class QueuedModel(TableModel):
    """A toy model whose forward of n tokens queues `base + per_token * n` seconds; a target
    (`reads_result`) then waits for the queue, as reading its verdict does."""

    def __init__(self, device: QueueingDevice, base: float, per_token: float,
                 reads_result: bool, **kwargs):
        super().__init__(**kwargs)
        self.queueing, self.base, self.per_token = device, base, per_token
        self.reads_result = reads_result

    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        self.queueing.queue(self.base + self.per_token * ids.numel())
        if self.reads_result:
            self.queueing.sync()
        return super().forward(ids, keep)


def queued_pair(device: QueueingDevice) -> tuple[QueuedModel, QueuedModel]:
    """A flat verify (17 tokens cost 1.16 steps, as on an H100) and a draft at c = 0.2
    that agrees with the target about two times in three."""
    target = QueuedModel(device, 1.0, 0.01, reads_result=True, vocab_size=16, seed=3)
    draft = QueuedModel(device, 0.2, 0.0, reads_result=False, vocab_size=16, seed=4)
    draft.copy_tables_from(target)
    draft.t1 += 1.5 * torch.randn(draft.t1.shape, generator=torch.Generator().manual_seed(1))
    return target, draft


def flat_prior() -> Costs:
    """The step costs `bench` and the chat time before an answer, synchronized each time."""
    return Costs.of({w: 1.0 + 0.01 * w for w in range(1, 10)}, 0.2)


def auto_answer(clock_for_rounds, rounds: int = 220) -> tuple[list[Round], AdaptiveK]:
    device = QueueingDevice()
    target, draft = queued_pair(device)
    policy = AdaptiveK(k_max=16, prior=flat_prior())
    decoder = Decoder(target, ModelDrafter(draft), eos_ids=set())
    decoder._clock = clock_for_rounds(device)
    settings = Settings(policy.k_start, SamplingParams(), policy)
    events = [e for e in decoder.generate([1, 2, 3], settings, rounds * 2) if isinstance(e, Round)]
    return events[:rounds], policy


def device_clock(device: QueueingDevice) -> DeviceClock:
    return DeviceClock(device.mark, device.perf_counter)


def test_on_a_queueing_device_a_round_s_draft_time_is_the_draft_s_own():
    rounds, _ = auto_answer(device_clock, rounds=60)
    drafting = [e for e in rounds[1:] if e.drafted and e.fed == e.drafted + 1]
    assert drafting
    for event in drafting:  # each draft step queued 0.2 s (one more to catch up a round)
        assert 0.2 * event.drafted - 1e-9 <= event.draft_s <= 0.2 * (event.drafted + 1) + 0.01
        assert event.verify_s < 1.0 + 0.01 * (event.drafted + 1) + 0.01


def test_k_auto_on_a_queueing_device_settles_on_the_k_its_costs_pay_best():
    """At α ≈ 0.75, c = 0.2 and a flat verify, k = 3 or 4 pays best (1.66 and 1.65 steps'
    worth a round, k = 8 1.45). Timed by the host's marks alone, this answer's auto settles
    on 8, and the first GPU run's asked k = 5 to 16 in turn."""
    rounds, _ = auto_answer(device_clock)
    accepted = sum(len(e.accepted) for e in rounds)
    alpha = accepted / (accepted + sum(1 for e in rounds if e.rejected))
    assert 0.6 < alpha < 0.85
    late = [e.k for e in rounds[40:]]
    assert max(late) <= 6, late
    assert sum(2 <= k <= 5 for k in late) >= 0.9 * len(late), late


def test_a_round_on_a_cpu_is_timed_by_the_host_and_on_cuda_by_the_stream():
    assert isinstance(round_clock(torch.device("cpu")), HostClock)
    if torch.cuda.is_available():
        assert isinstance(round_clock(torch.device("cuda")), DeviceClock)


def test_a_stream_mark_past_the_round_s_end_does_not_make_the_verify_negative():
    device = QueueingDevice()
    clock = DeviceClock(device.mark, device.perf_counter)
    clock.start()
    device.queue(0.5)
    clock.drafted()  # the host reads the clock before the queue ran: a stream ahead of it
    draft_s, verify_s = clock.split()
    assert draft_s == device.host and verify_s == 0.0


def test_marks_not_yet_completed_fall_back_to_the_host_s_split_rather_than_fail():
    """Reading a CUDA event that has not completed raises; a round whose sync left a mark
    pending (another stream) is split by the host's marks instead of ending the answer."""

    class Pending(QueueMark):
        def elapsed_time(self, end):
            return None

    device = QueueingDevice()
    clock = DeviceClock(lambda: Pending(device), device.perf_counter)
    clock.start()
    device.host += 0.25  # drafting on the host's own time
    clock.drafted()
    device.queue(1.0)
    device.sync()
    draft_s, verify_s = clock.split()
    assert abs(draft_s - 0.25) < 1e-9 and abs(verify_s - (device.host - 0.25)) < 1e-9
