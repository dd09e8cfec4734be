"""Suite-wide policy: in CI (`VAM_STRICT=1`) a test may not skip for a missing dependency.

Tests that need the heavy stack (torch, vLLM's CPU build, Mooncake) call
`pytest.importorskip`, so the light dev environment still collects and runs the rest. In CI
everything is installed, and a skip there would hide a broken install: strict mode turns
"could not import" skips into failures, whether the skip happens while a test runs or while
its module is collected. Skips that state a reason the machine cannot change (no NPU, a
CUDA/CANN-only build) stay skips.
"""

from __future__ import annotations

import os

import pytest

STRICT = os.environ.get("VAM_STRICT") == "1"
_MISSING = "could not import"


def _reason(longrepr: object) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if STRICT and report.skipped and _MISSING in _reason(report.longrepr):
        report.outcome = "failed"
        report.longrepr = f"VAM_STRICT=1: dependency missing in CI: {_reason(report.longrepr)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if STRICT and report.skipped and _MISSING in _reason(report.longrepr):
        report.outcome = "failed"
        report.longrepr = f"VAM_STRICT=1: dependency missing in CI: {_reason(report.longrepr)}"
