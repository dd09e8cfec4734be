"""`SendTracker`: the prefill requests whose blocks wait for their decode readers.

Both Mooncake P/D workers hold a finished prefill request's blocks until every expected reader
confirmed (`ReadDone`, or a layerwise reader done with all layers) or its send timeout passed.
"""

from __future__ import annotations

import threading
from collections import defaultdict

__all__ = ["EXPIRY_LOG_INTERVAL_S", "SendTracker"]

# A decode instance that went away expires every request it had, a few per engine step: their
# log line names the first at once and sums the rest at most this often (seconds).
EXPIRY_LOG_INTERVAL_S = 10.0


class SendTracker:
    """Prefill requests whose blocks wait for their readers (thread-safe).

    `ReadDone` may arrive before the scheduler's hand-over reaches this worker (the decode
    side can be that fast); such notes are kept and matched later, and dropped after
    `orphan_ttl_s` if the hand-over never comes.
    """

    def __init__(self, orphan_ttl_s: float) -> None:
        self._lock = threading.Lock()
        self._deadlines: dict[str, float] = {}
        self._readers: dict[str, set[str]] = defaultdict(set)
        self._expected: dict[str, int] = {}
        self._noted_at: dict[str, float] = {}
        self._orphan_ttl_s = orphan_ttl_s
        self.completed = 0
        self.expired = 0
        self._unlogged: list[str] = []
        self._logged_at: float | None = None

    def add(self, request_id: str, hold_s: float, now: float) -> None:
        with self._lock:
            self._deadlines[request_id] = now + hold_s

    def note(self, request_id: str, reader: str, expected: int, now: float) -> None:
        with self._lock:
            self._readers[request_id].add(reader)
            self._expected[request_id] = max(1, expected)
            self._noted_at.setdefault(request_id, now)

    def pending(self) -> int:
        with self._lock:
            return len(self._deadlines)

    def pop_finished(self, now: float) -> tuple[set[str], set[str]]:
        """`(read by all their readers, expired)` request ids, forgotten from here on."""
        done: set[str] = set()
        expired: set[str] = set()
        with self._lock:
            for request_id, deadline in list(self._deadlines.items()):
                expected = self._expected.get(request_id)
                if expected is not None and len(self._readers[request_id]) >= expected:
                    done.add(request_id)
                elif now >= deadline:
                    expired.add(request_id)
            for request_id in done | expired:
                del self._deadlines[request_id]
                self._forget(request_id)
            for request_id, noted in list(self._noted_at.items()):
                if request_id not in self._deadlines and now - noted > self._orphan_ttl_s:
                    self._forget(request_id)
            self.completed += len(done)
            self.expired += len(expired)
        return done, expired

    def expiries_to_log(self, expired: set[str], now: float) -> list[str]:
        """The expired request ids one log line names now: every expiry since the last line,
        at most one line per `EXPIRY_LOG_INTERVAL_S`; empty when no line is due."""
        with self._lock:
            self._unlogged.extend(sorted(expired))
            due = self._logged_at is None or now - self._logged_at >= EXPIRY_LOG_INTERVAL_S
            if not self._unlogged or not due:
                return []
            self._logged_at = now
            named, self._unlogged = self._unlogged, []
        return named

    def _forget(self, request_id: str) -> None:
        self._readers.pop(request_id, None)
        self._expected.pop(request_id, None)
        self._noted_at.pop(request_id, None)
