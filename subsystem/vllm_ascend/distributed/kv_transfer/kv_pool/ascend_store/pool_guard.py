"""`PoolGuard`: whether the KV pool is tried at all, and how its failures are logged.

After a `BackendError` the pool is bypassed for `retry_interval_s` (lookups, loads and saves
count as misses), then the backend's cheap reachability probe decides whether to try again;
errors are logged at most once per `error_log_interval_s` per kind (`RateLimitedLog`), with the
number of suppressed events.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from vllm_ascend.logger import init_logger

if TYPE_CHECKING:
    import logging

    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import Backend

__all__ = ["PoolGuard", "RateLimitedLog"]

logger = init_logger(__name__)


class RateLimitedLog:
    """Log each kind of event at most once per interval, reporting how many were suppressed.

    Args:
        log: the logger to write to.
        interval_s: the minimum time between two lines of the same kind, seconds.
        clock: time source (seconds), for tests.
    """

    def __init__(
        self,
        log: logging.Logger,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = log
        self.interval_s = interval_s
        self.clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warning(self, kind: str, msg: str, *args: object) -> bool:
        """Log `msg % args` unless a line of `kind` was logged within the interval.

        Returns:
            Whether a line was written.
        """
        now = self.clock()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.interval_s:
                self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
                return False
            self._last[kind] = now
            suppressed = self._suppressed.pop(kind, 0)
        if suppressed:
            msg += " (%d similar event(s) in the last %.0f s not logged)"
            args = (*args, suppressed, self.interval_s)
        self.log.warning(msg, *args)
        return True


class PoolGuard:
    """Whether the KV pool is tried, and the bookkeeping of its failures.

    Healthy: every operation goes to the store. After `failed()`: the store is bypassed (the
    caller treats the operation as a miss) until `retry_interval_s` passed and the backend's
    `is_reachable()` probe succeeds; the next operation then tries the store again.

    Args:
        backend: the store client.
        retry_interval_s: how long the pool is bypassed after a failure, seconds.
        log_interval_s: at most one log line per kind per interval, seconds.
        side: `"scheduler"` or `"worker N"`, for logs.
        clock: time source (seconds), for tests.
    """

    def __init__(
        self,
        backend: Backend,
        retry_interval_s: float,
        log_interval_s: float,
        side: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend = backend
        self.retry_interval_s = retry_interval_s
        self.side = side
        self.clock = clock
        self.log = RateLimitedLog(logger, log_interval_s, clock)
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._next_probe = 0.0
        self.skipped: dict[str, int] = {}
        self.failures = 0
        self._failures_taken = 0

    @property
    def healthy(self) -> bool:
        return self._down_since is None

    def available(self, op: str) -> bool:
        """True when `op` should go to the store; False counts it as skipped."""
        with self._lock:
            if self._down_since is None:
                return True
            now = self.clock()
            if now < self._next_probe:
                self.skipped[op] = self.skipped.get(op, 0) + 1
                return False
            self._next_probe = now + self.retry_interval_s
        # The probe may take up to its own short timeout: outside the lock.
        if not self.backend.is_reachable():
            with self._lock:
                self.skipped[op] = self.skipped.get(op, 0) + 1
            return False
        with self._lock:
            down_since, self._down_since = self._down_since, None
            skipped, self.skipped = self.skipped, {}
        if down_since is not None:
            # Rate-limited too: a store that answers the probe but fails calls would flap.
            self.log.warning(
                "recovered",
                "KV pool (%s, %s) reachable again after %.1f s; operations skipped meanwhile: %s",
                self.backend.name,
                self.side,
                self.clock() - down_since,
                skipped or "none",
            )
        return True

    def take_failures(self) -> int:
        """Failures recorded since the previous call (for the connector's metrics)."""
        with self._lock:
            new, self._failures_taken = self.failures - self._failures_taken, self.failures
        return new

    def failed(self, op: str, exc: BaseException) -> None:
        """Record a failed store call: bypass the pool for `retry_interval_s`."""
        with self._lock:
            self.failures += 1
            now = self.clock()
            if self._down_since is None:
                self._down_since = now
            self._next_probe = now + self.retry_interval_s
        self.log.warning(
            "unavailable",
            "KV pool (%s, %s) unavailable during %s: %s; lookups, loads and saves count as "
            "misses, retrying every %.0f s",
            self.backend.name,
            self.side,
            op,
            exc,
            self.retry_interval_s,
        )
