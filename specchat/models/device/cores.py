"""How many CPU cores this process may use, the thread counts that follow from them, and
which processor they are.

`physical_cores` is the default thread count of a llama.cpp model (hyper-threads share a
core's arithmetic units); `usable_cores` the most threads any model gets: a pair's
`threads` above it is capped to it, with a note the loader shows beside the backend
(thousands of threads on two cores once made 2 tokens in 3 minutes). Standard library
only; knows nothing about models.
"""

from __future__ import annotations

import os
from pathlib import Path


def usable_cores() -> int:
    """Logical CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def physical_cores() -> int:
    """Physical cores this process may use (hyper-threads share a core's arithmetic units)."""
    usable = usable_cores()
    cores: set[tuple[str, str]] = set()
    physical = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "physical id":
                physical = value.strip()
            elif key.strip() == "core id":
                cores.add((physical, value.strip()))
    except OSError:
        pass
    return max(1, min(usable, len(cores) or usable))


def capped_threads(requested: int | None) -> tuple[int, str]:
    """(threads to run, a note where `requested` was capped): None or 0 is every physical
    core; more than the usable cores is the usable cores."""
    if not requested:
        return physical_cores(), ""
    usable = usable_cores()
    if requested <= usable:
        return requested, ""
    return usable, f"threads = {requested} capped to the {usable} usable cores"


CPU_IDENTITY_KEYS = ("vendor_id", "cpu family", "model", "model name")
"""The /proc/cpuinfo lines that tell processors apart ("AMD EPYC" alone names every Zen)."""


def cpu_identity() -> str:
    """The processor, as far as timings on it depend on it: vendor, family, model and model
    name (from /proc/cpuinfo; the platform's own word elsewhere), and the usable cores."""
    found: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in CPU_IDENTITY_KEYS and key.strip() not in found:
                found[key.strip()] = value.strip()
    except OSError:
        pass
    if not found:
        import platform

        found["processor"] = platform.processor() or platform.machine()
    return ", ".join(f"{key} {value}" for key, value in found.items()) + f"; {usable_cores()} cores"
