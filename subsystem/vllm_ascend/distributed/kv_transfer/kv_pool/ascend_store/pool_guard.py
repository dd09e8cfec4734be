"""`PoolGuard`: whether the KV pool is tried at all, and how its failures are logged.

After a `BackendError` (or an unanswered call) the pool is bypassed for `retry_interval_s`
(lookups, loads and saves count as misses), then one trial call per interval is let through;
only an answered call ends the outage. A loss and a recovery are logged once each; the workers'
per-transfer warnings are logged at most once per `error_log_interval_s` per kind
(`RateLimitedLog`), with the number of suppressed events.
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
    caller treats the operation as a miss) until `retry_interval_s` passed; then one operation
    per `retry_interval_s` is let through as a trial (after the backend's cheap `is_reachable()`
    probe, unless the caller runs the trial off the engine step itself). Only an answered call
    (`succeeded()`) makes the pool healthy again: a service that accepts TCP connections but
    does not answer (a stopped process) stays lost.

    One log line per loss (the first failure) and one per recovery, each naming the service
    (`Backend.service`, e.g. the Mooncake master's address); failures in between are counted.

    Args:
        backend: the store client.
        retry_interval_s: how long the pool is bypassed after a failure, seconds.
        log_interval_s: at most one line per kind per interval for `log` (the workers'
            per-transfer warnings), seconds.
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

    def available(self, op: str, probe: bool = True) -> bool:
        """True when `op` should go to the store (healthy, or a trial is due); False counts it
        as skipped. `probe=False` leaves out the TCP probe before a trial (for a caller that
        runs the trial off the engine step, where the probe's own wait would not be)."""
        with self._lock:
            if self._down_since is None:
                return True
            now = self.clock()
            if now < self._next_probe:
                self.skipped[op] = self.skipped.get(op, 0) + 1
                return False
            self._next_probe = now + self.retry_interval_s
        # The probe may take up to its own short timeout: outside the lock.
        if probe and not self.backend.is_reachable():
            with self._lock:
                self.skipped[op] = self.skipped.get(op, 0) + 1
            return False
        return True

    def succeeded(self, op: str) -> None:
        """Record an answered store call: a lost pool is healthy again (logged once)."""
        if self._down_since is None:
            return
        with self._lock:
            down_since, self._down_since = self._down_since, None
            skipped, self.skipped = self.skipped, {}
        if down_since is None:
            return
        logger.warning(
            "KV pool (%s, %s) answers again (%s answered) after %.1f s, %s; operations skipped "
            "meanwhile: %s",
            self.backend.name,
            self.side,
            op,
            self.clock() - down_since,
            self.backend.service,
            skipped or "none",
        )

    def take_failures(self) -> int:
        """Failures recorded since the previous call (for the connector's metrics)."""
        with self._lock:
            new, self._failures_taken = self.failures - self._failures_taken, self.failures
        return new

    def failed(self, op: str, exc: BaseException) -> None:
        """Record a failed (or unanswered) store call: bypass the pool for `retry_interval_s`;
        the first failure of a loss is logged."""
        with self._lock:
            self.failures += 1
            now = self.clock()
            lost = self._down_since is None
            if lost:
                self._down_since = now
            self._next_probe = now + self.retry_interval_s
        if not lost:
            return
        logger.warning(
            "KV pool (%s, %s) unavailable during %s: %s, %s; lookups, loads and saves count "
            "as misses until a call is answered, tried every %.0f s",
            self.backend.name,
            self.side,
            op,
            exc,
            self.backend.service,
            self.retry_interval_s,
        )
