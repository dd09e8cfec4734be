"""The worker side's transfer machinery: where each block lives, and the threads that move it.

- `KVCacheLayout`: for each KV cache block id, the raw `(address, size)` segments that hold it
  (one per KV cache tensor and leading index, e.g. K and V halves), in a fixed order; the
  pool value of a block is their concatenation.
- `PoolGuard`: decides whether the store is tried at all. After a `BackendError` the pool is
  bypassed for `retry_interval_s` (lookups, loads and saves count as misses), then the backend's
  cheap reachability probe decides whether to try again; errors are logged at most once per
  `error_log_interval_s` per kind, with the number of suppressed events.
- `load_blocks` / `save_blocks`: batched store calls for a list of blocks.
- `KVCacheStoreSendingThread` / `KVCacheStoreRecvingThread`: one daemon thread each, fed by a
  bounded queue, that run saves and asynchronous loads off the forward path; `stop()` drains
  what is queued and joins within a timeout.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import (
    Backend,
    BackendError,
)
from vllm_ascend.distributed.kv_transfer.utils.block_copy import find_block_axis
from vllm_ascend.logger import init_logger

if TYPE_CHECKING:
    import logging

    import torch

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


# ---- block addresses -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Segment:
    # Block b's bytes of this segment: [offset + b * block_stride, ... + size).
    offset: int
    block_stride: int
    size: int


class KVCacheLayout:
    """Raw addresses of every block of a set of KV cache tensors.

    A block's value is one segment per KV cache tensor and leading index (the K/V axis of
    `[2, num_blocks, ...]` layouts), in tensor order. Consecutive segments that are adjacent in
    memory for every block (same block stride, one ending where the next starts, as in
    block-major layouts that keep all layers of a block side by side) are merged, so such a
    block is one segment and one zero-copy range for the store.

    Args:
        tensors: the distinct KV cache tensors, in layer order (any device).
        num_blocks: blocks per tensor (`KVCacheConfig.num_blocks`).

    Raises:
        ValueError: a tensor without a block axis among its first two axes, or whose block
            slices are not contiguous (the store needs raw byte ranges).
    """

    def __init__(self, tensors: Sequence[torch.Tensor], num_blocks: int) -> None:
        self.num_blocks = num_blocks
        segments: list[_Segment] = []
        storages: dict[int, int] = {}
        for t in tensors:
            segments.extend(self._describe(t, num_blocks))
            storage = t.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
        self._segments = _merge(segments)
        self.buffers: list[tuple[int, int]] = sorted(storages.items())
        self.segments_per_block = len(self._segments)
        self.bytes_per_block = sum(seg.size for seg in self._segments)
        self._sizes = [seg.size for seg in self._segments]

    @staticmethod
    def _describe(t: torch.Tensor, num_blocks: int) -> list[_Segment]:
        axis = find_block_axis(t, num_blocks)
        es = t.element_size()
        leads = [i * t.stride(0) * es for i in range(t.shape[0])] if axis == 1 else [0]
        one = t.select(axis, 0) if axis == 0 else t[0].select(0, 0)
        if not one.is_contiguous():
            raise ValueError(
                f"KV cache tensor of shape {tuple(t.shape)} and strides {t.stride()}: a block "
                "is not one contiguous byte range per leading index"
            )
        stride = t.stride(axis) * es
        size = one.numel() * es
        return [_Segment(t.data_ptr() + lead, stride, size) for lead in leads]

    def segments(self, block_id: int) -> tuple[list[int], list[int]]:
        """`(addresses, sizes)` of block `block_id`, in the pool value's order.

        Raises:
            IndexError: `block_id` outside `[0, num_blocks)`.
        """
        if not 0 <= block_id < self.num_blocks:
            raise IndexError(f"block id {block_id} outside [0, {self.num_blocks})")
        return [seg.offset + block_id * seg.block_stride for seg in self._segments], self._sizes


def _merge(segments: list[_Segment]) -> list[_Segment]:
    merged: list[_Segment] = []
    for seg in segments:
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.block_stride == seg.block_stride
            and last.offset + last.size == seg.offset
        ):
            merged[-1] = _Segment(last.offset, last.block_stride, last.size + seg.size)
        else:
            merged.append(seg)
    return merged


# ---- failure policy ----------------------------------------------------------------------


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


# ---- batched transfers ---------------------------------------------------------------------


def _batches(n: int, size: int) -> list[tuple[int, int]]:
    return [(i, min(i + size, n)) for i in range(0, n, size)]


def load_blocks(
    backend: Backend,
    guard: PoolGuard,
    layout: KVCacheLayout,
    keys: Sequence[str],
    block_ids: Sequence[int],
    batch_keys: int,
) -> list[int]:
    """Read `keys[i]` into KV cache block `block_ids[i]`, in batches of `batch_keys` keys.

    Returns:
        The block ids that did not receive their full value (missing key, store error, pool
        bypassed), in input order.
    """
    failed: list[int] = []
    for lo, hi in _batches(len(keys), batch_keys):
        ids = list(block_ids[lo:hi])
        if not guard.available("load"):
            failed.extend(ids)
            continue
        segments = [layout.segments(b) for b in ids]
        try:
            results = backend.get(keys[lo:hi], [s[0] for s in segments], [s[1] for s in segments])
        except BackendError as exc:
            guard.failed("load", exc)
            failed.extend(ids)
            continue
        expected = layout.bytes_per_block
        failed.extend(b for b, r in zip(ids, results, strict=True) if r != expected)
    return failed


def save_blocks(
    backend: Backend,
    guard: PoolGuard,
    layout: KVCacheLayout,
    keys: Sequence[str],
    block_ids: Sequence[int],
    batch_keys: int,
) -> tuple[int, dict[int, int]]:
    """Write KV cache block `block_ids[i]` under `keys[i]`, in batches of `batch_keys` keys.

    Returns:
        `(stored, failures)`: keys stored (or already present), and a count of the other
        keys per store code (`0` counts keys skipped because the pool was bypassed or the call
        failed as a whole).
    """
    stored = 0
    failures: dict[int, int] = {}
    for lo, hi in _batches(len(keys), batch_keys):
        n = hi - lo
        if not guard.available("save"):
            failures[0] = failures.get(0, 0) + n
            continue
        segments = [layout.segments(b) for b in block_ids[lo:hi]]
        try:
            results = backend.put(keys[lo:hi], [s[0] for s in segments], [s[1] for s in segments])
        except BackendError as exc:
            guard.failed("save", exc)
            failures[0] = failures.get(0, 0) + n
            continue
        for r in results:
            if r == 0:
                stored += 1
            else:
                failures[r] = failures.get(r, 0) + 1
    return stored, failures


# ---- threads -------------------------------------------------------------------------------


@dataclass
class TransferTask:
    """One request's blocks to move in one direction.

    Attributes:
        req_id: the request.
        keys: pool keys, one per block.
        block_ids: KV cache block ids, one per key.
        ready: for saves, the event after which the blocks hold their KV (the step's
            forward); None when nothing is pending.
    """

    req_id: str
    keys: list[str]
    block_ids: list[int]
    ready: DeviceEvent | None = None


_STOP = object()


class _TransferThread(threading.Thread):
    """A daemon thread that runs `TransferTask`s from a bounded queue, one at a time."""

    def __init__(
        self,
        name: str,
        backend: Backend,
        guard: PoolGuard,
        layout: KVCacheLayout,
        queue_size: int,
        batch_keys: int,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.backend = backend
        self.guard = guard
        self.layout = layout
        self.batch_keys = batch_keys
        self._queue: queue.Queue[object] = queue.Queue(maxsize=queue_size)
        self._stopping = False

    def submit(self, task: TransferTask) -> bool:
        """Queue `task`; False (nothing queued) when the queue is full or the thread stops."""
        if self._stopping:
            return False
        try:
            self._queue.put_nowait(task)
        except queue.Full:
            return False
        return True

    def run(self) -> None:
        self.backend.set_device()
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            assert isinstance(item, TransferTask)
            try:
                self.handle(item)
            except Exception:  # a bug must not kill the thread and strand every later task
                logger.exception("%s: transfer of request %s failed", self.name, item.req_id)
                self.abandon(item)

    def handle(self, task: TransferTask) -> None:
        raise NotImplementedError

    def abandon(self, task: TransferTask) -> None:
        """Called when `handle` raised: report the task as done (and failed)."""
        raise NotImplementedError

    def stop(self, timeout_s: float) -> bool:
        """Run what is queued, then stop. Returns False if the thread did not end in time."""
        self._stopping = True
        if not self.is_alive():
            return True
        deadline = time.monotonic() + timeout_s
        try:
            self._queue.put(_STOP, timeout=timeout_s)
        except queue.Full:
            return False
        self.join(max(0.0, deadline - time.monotonic()))
        return not self.is_alive()


class KVCacheStoreSendingThread(_TransferThread):
    """Saves blocks to the pool; `on_done(req_id, stored, failures)` after each task.

    Blocks are read after the task's `ready` event (the forward pass that wrote them); the
    caller keeps them allocated until `on_done` ran (delayed free, preemption wait).
    """

    def __init__(
        self,
        backend: Backend,
        guard: PoolGuard,
        layout: KVCacheLayout,
        queue_size: int,
        batch_keys: int,
        on_done: Callable[[str, int, dict[int, int]], None],
    ) -> None:
        super().__init__("kvpool-send", backend, guard, layout, queue_size, batch_keys)
        self.on_done = on_done

    def handle(self, task: TransferTask) -> None:
        if task.ready is not None:
            task.ready.synchronize()
        stored, failures = save_blocks(
            self.backend, self.guard, self.layout, task.keys, task.block_ids, self.batch_keys
        )
        self.on_done(task.req_id, stored, failures)

    def abandon(self, task: TransferTask) -> None:
        self.on_done(task.req_id, 0, {0: len(task.keys)})


class KVCacheStoreRecvingThread(_TransferThread):
    """Loads blocks for asynchronous loads; `on_done(req_id, num_blocks, failed_block_ids)`
    after each."""

    def __init__(
        self,
        backend: Backend,
        guard: PoolGuard,
        layout: KVCacheLayout,
        queue_size: int,
        batch_keys: int,
        on_done: Callable[[str, int, list[int]], None],
    ) -> None:
        super().__init__("kvpool-recv", backend, guard, layout, queue_size, batch_keys)
        self.on_done = on_done

    def handle(self, task: TransferTask) -> None:
        failed = load_blocks(
            self.backend, self.guard, self.layout, task.keys, task.block_ids, self.batch_keys
        )
        self.on_done(task.req_id, len(task.block_ids), failed)

    def abandon(self, task: TransferTask) -> None:
        self.on_done(task.req_id, len(task.block_ids), list(task.block_ids))
