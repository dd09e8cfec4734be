"""`DaemonThreads`: daemon threads fed by one bounded queue of calls, for transfers that must
never hold up an engine's shutdown.

`concurrent.futures.ThreadPoolExecutor` joins its threads when the interpreter exits, so a
transfer stuck on a dead peer or a hung store would hold up an engine's shutdown for its whole
timeout. These threads are daemons: shutdown waits at most as long as its caller says.

The queue is bounded: a peer or store that stalls every transfer must not grow it without end.
A call refused because the queue is full is the caller's to fail; with a `log`, the refusals
are logged once per time the queue fills up, not once per call. The Mooncake P/D connectors
(`kv_p2p/threads.py`) and the KV pool's sending and receiving threads
(`ascend_store/kv_transfer.py`) run on it.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from vllm_ascend.logger import init_logger

__all__ = ["DaemonThreads"]

_default_logger = init_logger(__name__)

_Call = tuple[Callable[..., Any], tuple[Any, ...]]


class DaemonThreads:
    """`num_threads` daemon threads sharing one bounded queue of calls.

    Calls submitted with the same `key` run one after the other, in submission order; other
    calls run on whichever thread is free. The bound counts queue entries: an unkeyed call, or
    a key with calls waiting that no thread has picked up yet. A call for a key already queued
    or running joins it and is never refused.

    Args:
        num_threads: how many calls may run at once.
        name: thread name prefix (for debuggers and logs).
        max_queued: queue entries waiting for a thread before `submit` refuses calls.
        log: where refusals (once per time the queue fills up) and failed calls are logged;
            None: refusals are the caller's to log, failed calls go to this module's logger.
        initializer: run first on each thread (e.g. binding the thread to a device); an
            exception there ends that thread.
    """

    def __init__(
        self,
        num_threads: int,
        name: str,
        max_queued: int,
        *,
        log: logging.Logger | None = None,
        initializer: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.max_queued = max_queued
        self._log = log
        self._initializer = initializer
        self._queue: queue.SimpleQueue[_Call | str | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._queued = 0  # entries put and not yet taken by a thread
        self._refused = 0  # calls refused since the queue last filled up
        # key -> calls waiting behind the one running; a key is present while it runs.
        self._keyed: dict[str, collections.deque[_Call]] = {}
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True)
            for i in range(num_threads)
        ]

    def start(self) -> None:
        """Start the threads (calls submitted before wait in the queue)."""
        for thread in self._threads:
            thread.start()

    def is_alive(self) -> bool:
        """Whether any thread still runs."""
        return any(thread.is_alive() for thread in self._threads)

    def submit(self, fn: Callable[..., Any], *args: Any, key: str | None = None) -> bool:
        """Run `fn(*args)` on a thread; its exceptions are logged, never raised.

        Returns:
            False when the queue is full: nothing was queued, and the caller fails the
            transfer (with a `log`, the first refusal after the queue filled up is logged).
        """
        with self._lock:
            waiting = self._keyed.get(key) if key is not None else None
            if waiting is not None:
                waiting.append((fn, args))
                return True
            if self._queued < self.max_queued:
                self._queued += 1
                if key is not None:
                    self._keyed[key] = collections.deque([(fn, args)])
                self._queue.put(key if key is not None else (fn, args))
                return True
            self._refused += 1
            first = self._refused == 1
        if first and self._log is not None:
            self._log.warning(
                "%s: transfer queue full (%d waiting; transfer_queue_size): new transfers "
                "fail until it has room again",
                self.name,
                self.max_queued,
            )
        return False

    @property
    def queued(self) -> int:
        """Queue entries waiting for a thread now."""
        with self._lock:
            return self._queued

    def stop(self, timeout_s: float = 0.0) -> bool:
        """Let each thread exit once it reaches the end of what is queued now; wait up to
        `timeout_s` seconds for that (0: do not wait; a busy thread finishes its call, or dies
        with the process).

        Returns:
            Whether every thread has ended (or never started).
        """
        for _ in self._threads:
            self._queue.put(None)
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            if thread.is_alive() and timeout_s > 0:
                thread.join(max(0.0, deadline - time.monotonic()))
        return not self.is_alive()

    def _run(self) -> None:
        if self._initializer is not None:
            self._initializer()
        while True:
            item = self._queue.get()
            if item is None:
                return
            self._taken()
            if isinstance(item, str):
                self._drain(item)
            else:
                self._call(item)

    def _taken(self) -> None:
        with self._lock:
            self._queued -= 1
            refused, self._refused = self._refused, 0
        if refused and self._log is not None:
            self._log.warning(
                "%s: transfer queue has room again; %d transfer(s) failed while it was full",
                self.name,
                refused,
            )

    def _drain(self, key: str) -> None:
        while True:
            with self._lock:
                waiting = self._keyed[key]
                if not waiting:
                    del self._keyed[key]
                    return
                call = waiting.popleft()
            self._call(call)

    def _call(self, call: _Call) -> None:
        fn, args = call
        try:
            fn(*args)
        except Exception:
            (self._log or _default_logger).exception(
                "transfer thread: %s failed", getattr(fn, "__name__", fn)
            )
