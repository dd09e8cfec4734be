"""Daemon transfer threads for the P/D connectors.

`concurrent.futures.ThreadPoolExecutor` joins its threads when the interpreter exits, so a
transfer stuck on a dead peer would hold up an engine's shutdown for its whole timeout. These
threads are daemons: shutdown never waits for a transfer that can no longer matter.
"""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable
from typing import Any

from vllm_ascend.logger import init_logger

__all__ = ["TransferThreads"]

logger = init_logger(__name__)

_Call = tuple[Callable[..., Any], tuple[Any, ...]]


class TransferThreads:
    """`num_threads` daemon threads sharing one queue of calls.

    Calls submitted with the same `key` run one after the other, in submission order (the
    layerwise connector keeps the pushes of one request ordered this way); other calls run on
    whichever thread is free.

    Args:
        num_threads: how many calls may run at once.
        name: thread name prefix (for debuggers and logs).
    """

    def __init__(self, num_threads: int, name: str) -> None:
        self._queue: queue.SimpleQueue[_Call | str | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # key -> calls waiting behind the one running; a key is present while it runs.
        self._keyed: dict[str, collections.deque[_Call]] = {}
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True)
            for i in range(num_threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any, key: str | None = None) -> None:
        """Run `fn(*args)` on a thread; its exceptions are logged, never raised."""
        if key is None:
            self._queue.put((fn, args))
            return
        with self._lock:
            waiting = self._keyed.get(key)
            if waiting is not None:
                waiting.append((fn, args))
                return
            self._keyed[key] = collections.deque([(fn, args)])
        self._queue.put(key)

    def stop(self) -> None:
        """Let idle threads exit; busy ones finish their call (or die with the process)."""
        for _ in self._threads:
            self._queue.put(None)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, str):
                self._drain(item)
            else:
                self._call(item)

    def _drain(self, key: str) -> None:
        while True:
            with self._lock:
                waiting = self._keyed[key]
                if not waiting:
                    del self._keyed[key]
                    return
                call = waiting.popleft()
            self._call(call)

    @staticmethod
    def _call(call: _Call) -> None:
        fn, args = call
        try:
            fn(*args)
        except Exception:
            logger.exception("transfer thread: %s failed", getattr(fn, "__name__", fn))
