"""`wait_until`: poll a condition with a bound, for tests that wait on threads, processes and
services.

Import it as `from tests.polling import wait_until` (the repository root is on `sys.path` when
pytest runs from it).
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["wait_until"]


def wait_until(
    check: Callable[[], bool],
    timeout_s: float,
    what: str | Callable[[], str],
    interval_s: float = 0.25,
) -> None:
    """Call `check` every `interval_s` seconds until it returns true.

    Args:
        check: the condition; it may also do the polling work (e.g. collect results).
        timeout_s: how long to wait, seconds.
        what: the condition in words, for the error (a callable is asked at the timeout, so
            the message can say what was seen by then).
        interval_s: the pause between calls, seconds.

    Raises:
        TimeoutError: `check` still false after `timeout_s`.
    """
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            described = what() if callable(what) else what
            raise TimeoutError(f"{described} not reached after {timeout_s:g} s")
        time.sleep(interval_s)
