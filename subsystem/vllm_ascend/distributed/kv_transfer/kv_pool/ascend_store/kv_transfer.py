"""The worker side's transfer threads, and the names of the transfer machinery.

`KVCacheStoreSendingThread` / `KVCacheStoreRecvingThread`: one daemon thread each, fed by a
bounded queue (`utils/daemon_threads.DaemonThreads`), that run saves and asynchronous loads off
the forward path; `stop()` drains what is queued and joins within a timeout. A load carries a
deadline: the receiving thread starts no store call for it once the deadline passed (the
worker has then reported it failed already).

The rest of the machinery lives in modules of its own and is re-exported here, because this
module's name is the one upstream's 0.14 layout (and the move table in `rules/`) gives it:
`block_layout.KVCacheLayout` (block addresses), `pool_guard.PoolGuard` and `RateLimitedLog`
(failure policy), `block_io.load_blocks` / `save_blocks` (batched store calls).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.block_io import (
    load_blocks,
    save_blocks,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.block_layout import KVCacheLayout
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_guard import (
    PoolGuard,
    RateLimitedLog,
)
from vllm_ascend.distributed.kv_transfer.utils.daemon_threads import DaemonThreads
from vllm_ascend.logger import init_logger

if TYPE_CHECKING:
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import Backend
    from vllm_ascend.distributed.kv_transfer.utils.device import DeviceEvent

__all__ = [
    "KVCacheLayout",
    "KVCacheStoreRecvingThread",
    "KVCacheStoreSendingThread",
    "PoolGuard",
    "RateLimitedLog",
    "TransferTask",
    "load_blocks",
    "save_blocks",
]

logger = init_logger(__name__)

# What a finished task reports besides its request and size: the sending thread's failure
# counts per store code, the receiving thread's failed block ids.
ResultT = TypeVar("ResultT")


@dataclass
class TransferTask:
    """One request's blocks to move in one direction.

    Attributes:
        req_id: the request.
        keys: pool keys, one per block.
        block_ids: KV cache block ids, one per key.
        ready: for saves, the event after which the blocks hold their KV (the step's
            forward); None when nothing is pending.
        deadline: for loads, `time.monotonic()` after which no store call starts; None for
            no deadline.
    """

    req_id: str
    keys: list[str]
    block_ids: list[int]
    ready: DeviceEvent | None = None
    deadline: float | None = None


class _TransferThread(Generic[ResultT]):
    """A daemon thread that runs `TransferTask`s from a bounded queue, one at a time, and
    reports each as `on_done(task, count, result)`."""

    thread_name = "kvpool-transfer"

    def __init__(
        self,
        backend: Backend,
        guard: PoolGuard,
        layout: KVCacheLayout,
        queue_size: int,
        batch_keys: int,
        on_done: Callable[[TransferTask, int, ResultT], None],
    ) -> None:
        self.name = self.thread_name
        self.backend = backend
        self.guard = guard
        self.layout = layout
        self.batch_keys = batch_keys
        self.on_done = on_done
        # The thread binds itself to the KV cache's device before its first task.
        self._thread = DaemonThreads(1, self.name, queue_size, initializer=backend.set_device)
        self._stopping = False

    def start(self) -> None:
        """Start the thread (tasks submitted before wait in the queue)."""
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, task: TransferTask) -> bool:
        """Queue `task`; False (nothing queued) when the queue is full or the thread stops."""
        if self._stopping:
            return False
        return self._thread.submit(self._run_task, task)

    def _run_task(self, task: TransferTask) -> None:
        try:
            self.handle(task)
        except Exception:  # a bug must not strand the task's request: report it failed
            logger.exception("%s: transfer of request %s failed", self.name, task.req_id)
            self.abandon(task)

    def handle(self, task: TransferTask) -> None:
        raise NotImplementedError

    def abandon(self, task: TransferTask) -> None:
        """Called when `handle` raised: report the task as done (and failed)."""
        raise NotImplementedError

    def stop(self, timeout_s: float) -> bool:
        """Run what is queued, then stop. Returns False if the thread did not end in time."""
        self._stopping = True
        return self._thread.stop(timeout_s)


class KVCacheStoreSendingThread(_TransferThread[dict[int, int]]):
    """Saves blocks to the pool; `on_done(task, stored, failures)` after each task.

    Blocks are read after the task's `ready` event (the forward pass that wrote them); the
    caller keeps them allocated until `on_done` ran (delayed free, preemption wait).
    """

    thread_name = "kvpool-send"

    def handle(self, task: TransferTask) -> None:
        if task.ready is not None:
            task.ready.synchronize()
        stored, failures = save_blocks(
            self.backend, self.guard, self.layout, task.keys, task.block_ids, self.batch_keys
        )
        self.on_done(task, stored, failures)

    def abandon(self, task: TransferTask) -> None:
        self.on_done(task, 0, {0: len(task.keys)})


class KVCacheStoreRecvingThread(_TransferThread[list[int]]):
    """Loads blocks for asynchronous loads; `on_done(task, num_blocks, failed_block_ids)`
    after each."""

    thread_name = "kvpool-recv"

    def handle(self, task: TransferTask) -> None:
        failed = load_blocks(
            self.backend,
            self.guard,
            self.layout,
            task.keys,
            task.block_ids,
            self.batch_keys,
            deadline=task.deadline,
        )
        self.on_done(task, len(task.block_ids), failed)

    def abandon(self, task: TransferTask) -> None:
        self.on_done(task, len(task.block_ids), list(task.block_ids))
