"""`SaveTracker`: the KV pool worker's queued saves, per request, until they are done.

A synchronous load holds its requests here too (`add`, then `release`): a store call past the
step's bound may still write into their blocks, so they are not freed before it returned.

A request with saves keeps its blocks until it finished on the scheduler and its saves are
done (`pop_finished`); a preempted request's saves are finished before its blocks are reused
(`wait_for`). Each finished save is counted (`saved_blocks`, `save_failed_blocks`), and keys
the store refused are logged at most once per interval.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.kv_transfer import (
        TransferTask,
    )
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_guard import (
        RateLimitedLog,
    )
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.stats import AscendStoreStats
    from vllm_ascend.distributed.kv_transfer.utils.connector_stats import StatsRecorder

__all__ = ["SaveTracker"]


class SaveTracker:
    """Pending saves per request (thread-safe: `finish` comes from the sending thread).

    Args:
        recorder: the worker's counters.
        log: the worker's rate-limited warnings.
        store: the store's name, for log lines.
    """

    def __init__(
        self, recorder: StatsRecorder[AscendStoreStats], log: RateLimitedLog, store: str
    ) -> None:
        self.recorder = recorder
        self.log = log
        self.store = store
        self._cond = threading.Condition()
        self._pending: dict[str, int] = {}
        self._tracked: set[str] = set()  # requests with saves, not yet reported finished
        self._finished: set[str] = set()  # of those, finished on the scheduler

    def add(self, req_id: str) -> None:
        """One more save of `req_id` is queued."""
        with self._cond:
            self._tracked.add(req_id)
            self._pending[req_id] = self._pending.get(req_id, 0) + 1

    def release(self, req_ids: Iterable[str]) -> None:
        """A hold taken with `add` for each of `req_ids` ends without a save (a synchronous
        load that may write into the request's blocks returned). Wakes the waiters."""
        with self._cond:
            for req_id in req_ids:
                left = self._pending.get(req_id, 0) - 1
                if left > 0:
                    self._pending[req_id] = left
                else:
                    self._pending.pop(req_id, None)
            self._cond.notify_all()

    def finish(self, task: TransferTask, stored: int, failures: dict[int, int]) -> None:
        """The save `task` is over (or dropped): `stored` keys stored, the others counted per
        store code in `failures` (`0`: skipped, not refused by the store). Wakes the waiters."""
        # Count first: a caller woken by the save's completion (wait_idle) sees its blocks.
        self.recorder.add("saved_blocks", stored)
        self.recorder.add("save_failed_blocks", sum(failures.values()))
        with self._cond:
            left = self._pending.get(task.req_id, 0) - 1
            if left > 0:
                self._pending[task.req_id] = left
            else:
                self._pending.pop(task.req_id, None)
            self._cond.notify_all()
        store_codes = {code: n for code, n in failures.items() if code != 0}
        if store_codes:
            self.log.warning(
                "save_failed",
                "KV pool (%s): %d block(s) not saved, by store code: %s (the pool is full or "
                "evicting; they are recomputed when needed)",
                self.store,
                sum(store_codes.values()),
                store_codes,
            )

    def pending(self) -> int:
        """Saves queued or running now, all requests."""
        with self._cond:
            return sum(self._pending.values())

    def pop_finished(self, finished_req_ids: Iterable[str]) -> set[str]:
        """Requests finished on the scheduler (now or in an earlier call) whose saves are all
        done; forgotten from here on."""
        with self._cond:
            self._finished.update(r for r in finished_req_ids if r in self._tracked)
            sending = {r for r in self._finished if r not in self._pending}
            self._finished -= sending
            self._tracked -= sending
        return sending

    def wait_for(self, req_ids: Iterable[str], timeout_s: float) -> str | None:
        """Block until no save of `req_ids` is pending, for `timeout_s` seconds at most.

        Returns:
            None when they are all done; else the first request still pending at the timeout
            (the wait stops there).
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            for req_id in req_ids:
                left = max(0.0, deadline - time.monotonic())
                if not self._cond.wait_for(partial(self._saved, req_id), left):
                    return req_id
        return None

    def _saved(self, req_id: str) -> bool:
        # With self._cond held.
        return req_id not in self._pending

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until no save is pending; False after `timeout_s` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending, timeout_s)
