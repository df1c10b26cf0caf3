"""The executor the chat's thread workers run on: each job on a thread of its own, which ends
with the job.

Why not a pool of threads that live on: a thread that ran torch's parallel work keeps its own
OpenMP team (libgomp's) for as long as it lives. Once a process holds more OpenMP threads than
the machine has cores, libgomp stops letting them spin between parallel regions, and every
region pays for waking them. On 2 cores that made every target forward in the chat slower
than in `specchat run`: the pair's load, its baseline and each answer had landed on different
pooled threads (docs/choices.md, "Every model job runs on a thread that ends with it").

Closing the app does not wait here for a job that is still running: the worker was cancelled
and stops within a round, and the interpreter waits for its thread at exit, as it did for a
pooled one. Knows nothing about models, torch or widgets.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, TypeVar

T = TypeVar("T")


class WorkerThreads(ThreadPoolExecutor):
    """One new thread per submitted job, named `prefix_N`. A `ThreadPoolExecutor` in name
    only (asyncio's default executor must be one); its pool is never used."""

    def __init__(self, prefix: str = "specchat-worker"):
        super().__init__(max_workers=1, thread_name_prefix=prefix)
        self.prefix = prefix
        self._numbers = itertools.count()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        thread = threading.Thread(target=run_job, args=(future, fn, args, kwargs),
                                  name=f"{self.prefix}_{next(self._numbers)}")
        thread.start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to stop: each job's thread ends with its job."""


def run_job(future: Future[T], fn: Callable[..., T], args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> None:
    """Run `fn` for `future`, unless the future was cancelled before it started."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args, **kwargs)
    except BaseException as error:  # the future carries it to the awaiting worker
        future.set_exception(error)
    else:
        future.set_result(result)
