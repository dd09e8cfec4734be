"""`TransferThreads`: the P/D connectors' daemon transfer threads (`utils/daemon_threads.py`).

A transfer refused because the queue (`transfer_queue_size`) is full is the caller's to fail
as a transfer failure of its request; the refusals are logged here, once per time the queue
fills up, not once per call.
"""

from __future__ import annotations

from vllm_ascend.distributed.kv_transfer.utils.daemon_threads import DaemonThreads
from vllm_ascend.logger import init_logger

__all__ = ["TransferThreads"]

logger = init_logger(__name__)


class TransferThreads(DaemonThreads):
    """`DaemonThreads`, started at once, logging to this module's logger.

    The layerwise connector keeps the pushes of one request ordered with `submit(..., key=)`.

    Args:
        num_threads: how many calls may run at once.
        name: thread name prefix (for debuggers and logs).
        max_queued: queue entries waiting for a thread before `submit` refuses calls
            (`transfer_queue_size`).
    """

    def __init__(self, num_threads: int, name: str, max_queued: int) -> None:
        super().__init__(num_threads, name, max_queued, log=logger)
        self.start()
