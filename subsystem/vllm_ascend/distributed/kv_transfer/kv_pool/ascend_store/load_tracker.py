"""`LoadTracker`: the KV pool worker's load results, and its deadline-bound asynchronous loads.

Blocks that did not load (missing key, store failure) are collected for
`get_block_ids_with_load_errors`, counted (`loaded_blocks`, `load_failed_blocks`) and logged at
most once per interval. An asynchronous load is reported done once the receiving thread
finished it, or once its deadline passed: then with all its blocks failed, and the thread's
late result for it is dropped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from vllm_ascend.logger import init_logger

if TYPE_CHECKING:
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.kv_transfer import (
        TransferTask,
    )
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_guard import (
        RateLimitedLog,
    )
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.stats import AscendStoreStats
    from vllm_ascend.distributed.kv_transfer.utils.connector_stats import StatsRecorder

__all__ = ["LoadTracker"]

logger = init_logger(__name__)


class LoadTracker:
    """Load errors and the asynchronous loads not yet reported (thread-safe: `finish` comes
    from the receiving thread).

    Args:
        recorder: the worker's counters.
        log: the worker's rate-limited warnings.
        timeout_s: `load_timeout_s`, for log lines (each load carries its own deadline).
    """

    def __init__(
        self, recorder: StatsRecorder[AscendStoreStats], log: RateLimitedLog, timeout_s: float
    ) -> None:
        self.recorder = recorder
        self.log = log
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._loads: dict[str, TransferTask] = {}  # queued or running, not yet reported
        self._done: set[str] = set()
        self._errors: set[int] = set()

    def track(self, task: TransferTask) -> None:
        """`task` (an asynchronous load, with its deadline) is about to be queued; it replaces
        an earlier load of the same request."""
        with self._lock:
            self._loads[task.req_id] = task

    def finish(self, task: TransferTask, total: int, failed: list[int]) -> None:
        """The asynchronous load `task` of `total` blocks is over, `failed` did not load.

        Errors and completion are recorded at once, so a request is never reported done before
        its failed blocks. A load past its deadline was reported already (and its request may
        have a newer load): its result is dropped.
        """
        with self._lock:
            current = self._loads.get(task.req_id) is task
            if current:
                del self._loads[task.req_id]
                self._errors.update(failed)
                self._done.add(task.req_id)
        if current:
            self._count(total, failed)
        else:
            logger.info(
                "KV pool: load of request %s returned after its %.0f s deadline; dropped",
                task.req_id,
                self.timeout_s,
            )

    def finish_sync(self, total: int, failed: list[int]) -> None:
        """A synchronous load of `total` blocks is over, `failed` did not load."""
        self._count(total, failed)
        with self._lock:
            self._errors.update(failed)

    def pop_done(self) -> set[str]:
        """Requests whose asynchronous load is done or past its deadline (then failed), each
        reported once."""
        with self._lock:
            expired = self._expire() if self._loads else []
            done, self._done = self._done, set()
        for task in expired:
            self.recorder.add("load_failed_blocks", len(task.block_ids))
            self.log.warning(
                "load_timeout",
                "KV pool: asynchronous load of request %s (%d block(s)) not done within "
                "load_timeout_s=%g s; it fails as a load error (kv_load_failure_policy applies)",
                task.req_id,
                len(task.block_ids),
                self.timeout_s,
            )
        return done

    def take_errors(self) -> set[int]:
        """Block ids whose load failed since the last call (then forgotten)."""
        with self._lock:
            errors, self._errors = self._errors, set()
        return errors

    def _expire(self) -> list[TransferTask]:
        # With self._lock held: loads past their deadline are done with every block failed.
        now = time.monotonic()
        expired = [t for t in self._loads.values() if t.deadline is not None and now >= t.deadline]
        for task in expired:
            del self._loads[task.req_id]
            self._errors.update(task.block_ids)
            self._done.add(task.req_id)
        return expired

    def _count(self, total: int, failed: Sequence[int]) -> None:
        self.recorder.add("loaded_blocks", total - len(failed))
        self.recorder.add("load_failed_blocks", len(failed))
        if failed:
            self.log.warning(
                "load_failed",
                "KV pool: %d block(s) failed to load (missing or unreadable); vLLM recomputes "
                "them or fails their requests per kv_load_failure_policy",
                len(failed),
            )
