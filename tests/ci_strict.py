"""In CI a missing requirement fails the run instead of skipping (a pytest plugin; conftest.py
takes its hooks).

Locally, a test whose optional package is missing skips and says why
(`pytest.importorskip("llama_cpp")`: make test installs it, a quick run may not). In CI
(`CI=true`, or 1 / yes) every package a test asks for that way must be there: `make test`
installs every extra the tests use, so a skip would mean a broken install step hiding
behind a green run. Such a skip, at collection (a module-level importorskip) or in a test,
becomes a failure that names the package. Tests whose skip is not an import (int8's
fbgemm kernels, the qwen-coder extra's part wheels) say where they must run with the
`required_in_ci(when=...)` marker, and their skip fails the same way there.

Other skips stay skips (the `gpu` tests without CUDA, the browser test without Chromium,
which .ci/run installs only on a best-effort basis).
"""

from __future__ import annotations

import os
import platform

import pytest

X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")
"""Where torch's CPU build has fbgemm's kernels (the int8 backend's)."""


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "required_in_ci(when=True): in CI (CI=true) this test "
                            "must run where `when` holds: a skip there is a failure")


def skipped_by_importorskip(call: pytest.CallInfo | None) -> bool:
    """Whether the skip was raised by `pytest.importorskip` (a missing package)."""
    if call is None or call.excinfo is None:
        return False
    return any(entry.frame.code.name == "importorskip" for entry in call.excinfo.traceback)


def required_here(item: pytest.Item | None) -> bool:
    marker = item.get_closest_marker("required_in_ci") if item is not None else None
    return marker is not None and bool(marker.kwargs.get("when", True))


def made_strict(report: pytest.CollectReport | pytest.TestReport, why: str) -> None:
    """Turn a skip report into a failure that says what CI is missing."""
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = f"CI=true: {why}, so this skip fails the run: {reason}"


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    report = yield
    if in_ci() and report.skipped and skipped_by_importorskip(getattr(report, "call", None)):
        made_strict(report, "make test installs every package the tests import")
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        if skipped_by_importorskip(call):
            made_strict(report, "make test installs every package the tests import")
        elif required_here(item):
            made_strict(report, "this test is marked required_in_ci on this machine")
    return report
