"""`BoundedCall`: a store call an engine step waits on for at most a bound, one at a time.

The scheduler asks the pool which blocks it holds inside an engine step. A store whose service
hangs (a stopped Mooncake master keeps its TCP socket open, so calls wait for the store's own
RPC timeout, ~30 s) would hold that step, and every request in it, for as long. Here the call
runs on one daemon thread; the step waits at most `timeout_s` and takes no answer as a miss.
While a call is still unanswered, later calls are not queued behind it (they would all time
out): they are misses at once, so a hung store costs a step at most one `timeout_s`, and no
threads pile up.

The call's outcome goes to the `PoolGuard` whenever it arrives, late ones included: an answer
declares the pool healthy again (the only way it recovers), a `BackendError` or a timeout marks
it lost (logged once per loss by the guard).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Generic, TypeVar

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import (
    BackendError,
)
from vllm_ascend.logger import init_logger

if TYPE_CHECKING:
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_guard import PoolGuard

__all__ = ["BoundedCall"]

logger = init_logger(__name__)

T = TypeVar("T")


class BoundedCall(Generic[T]):
    """Run store calls of one kind (`op`) on a daemon thread, one in flight at a time.

    Args:
        guard: told of every outcome (`succeeded`, `failed`).
        op: the operation's name in the guard's counters and log lines (`"lookup"`).
        timeout_s: the longest `run(..., wait=True)` waits for an answer, seconds.
    """

    def __init__(self, guard: PoolGuard, op: str, timeout_s: float) -> None:
        self.guard = guard
        self.op = op
        self.timeout_s = timeout_s
        self.busy = 0  # calls turned away because one was still in flight
        self.timeouts = 0  # calls the caller stopped waiting for
        self._lock = threading.Lock()
        self._pending: Future[T] | None = None
        self._tasks: queue.SimpleQueue[tuple[Callable[[], T], Future[T]] | None] = (
            queue.SimpleQueue()
        )
        # A daemon: a call stuck in the store must not keep the process from exiting.
        self._thread = threading.Thread(target=self._serve, name=f"kvpool-{op}", daemon=True)
        self._thread.start()

    @property
    def in_flight(self) -> bool:
        """Whether a call is still waiting for the store's answer."""
        return self._pending is not None

    def run(self, call: Callable[[], T], wait: bool = True) -> T | None:
        """`call()`'s result, or None when it is not answered within `timeout_s`, failed with a
        `BackendError`, or was not made because an earlier call is still in flight.

        `wait=False` starts the call (a probe whose answer only informs the guard) and returns
        None at once. Exceptions other than `BackendError` propagate when waited for.
        """
        future: Future[T] = Future()
        with self._lock:
            if self._pending is not None:
                self.busy += 1
                return None
            self._pending = future
        future.add_done_callback(self._finished)
        self._tasks.put((call, future))
        if not wait:
            return None
        try:
            return future.result(timeout=self.timeout_s)
        except BackendError:
            return None  # the callback told the guard
        except FutureTimeout:
            pass
        with self._lock:
            unanswered = self._pending is future
            if unanswered:
                self.timeouts += 1
                # Under the lock: an answer arriving now is reported after this, and wins.
                self.guard.failed(self.op, TimeoutError(f"no answer within {self.timeout_s:g} s"))
        if unanswered:
            return None
        return self.run_result(future)

    @staticmethod
    def run_result(future: Future[T]) -> T | None:
        """The result of an answered `future` (None for a `BackendError`)."""
        try:
            return future.result(timeout=0)
        except BackendError:
            return None

    def _finished(self, future: Future[T]) -> None:
        with self._lock:
            if self._pending is future:
                self._pending = None
        exc = future.exception()
        if exc is None:
            self.guard.succeeded(self.op)
        elif isinstance(exc, BackendError):
            self.guard.failed(self.op, exc)
        else:
            logger.error("KV pool %s raised %r", self.op, exc)
            self.guard.failed(self.op, exc)

    def _serve(self) -> None:
        while (task := self._tasks.get()) is not None:
            call, future = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                future.set_exception(exc)

    def close(self) -> None:
        """Stop the thread once its current call returns (it is not waited for)."""
        self._tasks.put(None)
