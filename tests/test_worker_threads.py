"""The chat's thread workers run each job on a thread that ends with it, and the OpenMP team
that torch starts on that thread ends with it too: a team left behind on an idle thread made
every target forward in the chat slower than in `specchat run` (docs/choices.md)."""

from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import Future

import pytest
import torch
from tui_support import ask, make_app, ready, streaming, wait_for

from specchat.tui.worker_threads import WorkerThreads, run_job

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="counts the process's threads in /proc/self/task")


def os_threads() -> int:
    """The process's threads as the kernel counts them: OpenMP's included."""
    return len(os.listdir("/proc/self/task"))


def parallel_work() -> int:
    """Work torch splits over its threads; the process's thread count while this job holds
    its team."""
    torch.ones(4_000_000).exp_().sum()
    return os_threads()


def settles_at(count: int, timeout: float = 5.0) -> int:
    deadline = time.monotonic() + timeout
    while os_threads() != count and time.monotonic() < deadline:
        time.sleep(0.01)
    return os_threads()


@pytest.fixture
def two_torch_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@linux_only
def test_a_jobs_thread_and_its_openmp_team_end_with_the_job(two_torch_threads):
    executor, before = WorkerThreads("test-worker"), os_threads()
    during = executor.submit(parallel_work).result(timeout=60)
    assert during >= before + 2, "the job's thread and torch's second thread were running"
    assert settles_at(before) == before


@linux_only
def test_jobs_one_after_another_keep_no_team_each(two_torch_threads):
    executor, before = WorkerThreads("test-worker"), os_threads()
    for _ in range(4):
        executor.submit(parallel_work).result(timeout=60)
    assert settles_at(before) == before


def test_a_jobs_error_reaches_whoever_awaits_it():
    def fails() -> None:
        raise ValueError("no such model")

    with pytest.raises(ValueError, match="no such model"):
        WorkerThreads("test-worker").submit(fails).result(timeout=10)


def test_a_job_cancelled_before_its_thread_starts_never_runs():
    ran: list[int] = []
    cancelled: Future[None] = Future()
    cancelled.cancel()
    run_job(cancelled, lambda: ran.append(1), (), {})
    assert not ran


async def test_no_worker_thread_outlives_the_load_and_the_answer():
    app = make_app()
    async with app.run_test(size=(150, 45)) as pilot:
        await ready(pilot)
        await ask(pilot)
        await wait_for(pilot, lambda: not streaming(app))
        await wait_for(pilot, lambda: not [thread for thread in threading.enumerate()
                                           if thread.name.startswith("specchat-worker")])
