"""Worker side of the KV pool: moves KV cache blocks between this worker's KV cache and the pool.

Each worker stores its own slice of a block (its TP rank's heads, its PP rank's layers) under
its own key. Per step:

- `start_load_kv`: synchronous loads are read into the KV cache right here, in batched store
  calls, before the forward pass that needs them; asynchronous loads go to the receiving
  thread, and the request is reported in `finished_recving` once they are done.
- `wait_for_save`: the step's saves go to the sending thread, after an event marking the end
  of the forward pass that wrote the blocks. A request with saves keeps its blocks until it
  finished on the scheduler and its saves are done (`get_finished` reports it in
  `finished_sending`); a preempted request's saves are finished before its blocks are reused
  (`handle_preemptions`).
- Blocks that did not load (missing key, store failure) are reported through
  `get_block_ids_with_load_errors`; vLLM then recomputes them or fails the request according
  to `kv_load_failure_policy`.
- An asynchronous load not done `load_timeout_s` after it was queued (a store call that hangs)
  is reported finished with all its blocks failed at the next `get_finished`, so the request
  leaves `WAITING_FOR_REMOTE_KVS` (and an aborted one frees its blocks) without waiting for the
  store's own timeouts. The store call itself cannot be recalled: a batch already inside the
  store may still write its blocks when it returns (with the same prefix's KV); no further
  batch of that load starts, and its late result is dropped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import Backend
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.block_io import load_blocks
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.block_layout import KVCacheLayout
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.config_data import (
    AscendStoreConfig,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.kv_transfer import (
    KVCacheStoreRecvingThread,
    KVCacheStoreSendingThread,
    TransferTask,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_client import open_pool
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.stats import AscendStoreStats
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.step_metadata import (
    AscendConnectorMetadata,
)
from vllm_ascend.distributed.kv_transfer.utils.connector_stats import StatsRecorder
from vllm_ascend.distributed.kv_transfer.utils.device import (
    KVDevice,
    resolve_device,
    unique_kv_tensors,
)
from vllm_ascend.logger import init_logger

if TYPE_CHECKING:
    import torch
    from vllm.config import VllmConfig
    from vllm.v1.kv_cache_interface import KVCacheConfig

__all__ = ["KVPoolWorker", "parallel_ranks"]

logger = init_logger(__name__)


def parallel_ranks() -> tuple[int, int]:
    """This worker's `(tp_rank, pp_rank)`; `(0, 0)` before vLLM's groups exist."""
    from vllm.distributed import parallel_state as ps

    if not ps.model_parallel_is_initialized():
        return 0, 0
    return ps.get_tensor_model_parallel_rank(), ps.get_pp_group().rank_in_group


class KVPoolWorker:
    """Worker-side logic; `AscendStoreConnector` forwards the worker methods here.

    Args:
        vllm_config: the engine's config.
        kv_cache_config: the KV cache layout (number of blocks, block size).
        config: the connector's validated extra config.
        backend: a connected store client (default: one from `config`, contributing memory).
        ranks: `(tp_rank, pp_rank)` (default: from vLLM's parallel state).

    Raises:
        ValueError: an unsupported KV cache layout or an invalid store config.
        BackendError: the store cannot be reached or set up.
    """

    def __init__(
        self,
        vllm_config: VllmConfig,
        kv_cache_config: KVCacheConfig,
        config: AscendStoreConfig,
        backend: Backend | None = None,
        ranks: tuple[int, int] | None = None,
    ) -> None:
        self.config = config
        self.num_blocks = kv_cache_config.num_blocks
        self.tp_rank, self.pp_rank = ranks if ranks is not None else parallel_ranks()
        pool = open_pool(
            vllm_config,
            kv_cache_config,
            config,
            backend,
            side=f"worker tp{self.tp_rank}-pp{self.pp_rank}",
            lookup_only=False,
        )
        self.block_size, self.db, self.backend, self.guard = (
            pool.block_size,
            pool.db,
            pool.backend,
            pool.guard,
        )
        self.layout: KVCacheLayout | None = None
        self.device: KVDevice | None = None
        self.sender: KVCacheStoreSendingThread | None = None
        self.recver: KVCacheStoreRecvingThread | None = None
        self._cond = threading.Condition()
        self._pending_saves: dict[str, int] = {}
        self._tracked: set[str] = set()  # requests with saves, not yet reported finished
        self._finished: set[str] = set()  # of those, finished on the scheduler
        self._recv_done: set[str] = set()
        self._async_loads: dict[str, TransferTask] = {}  # queued or running, not yet reported
        self._load_errors: set[int] = set()
        self.recorder = StatsRecorder(AscendStoreStats)

    # ---- set-up -----------------------------------------------------------------------------

    def register_kv_caches(
        self, kv_caches: Mapping[str, torch.Tensor | Sequence[torch.Tensor]]
    ) -> None:
        """Map every block to its addresses, register the KV cache memory, start the threads.

        Raises:
            ValueError: a KV cache tensor without a usable block axis.
            BackendError: the store refused the memory registration.
        """
        tensors = unique_kv_tensors(kv_caches)
        self.device = resolve_device(tensors)
        self.layout = KVCacheLayout(tensors, self.num_blocks)
        self.backend.device = self.device.torch_device
        self.backend.register_buffer(
            [ptr for ptr, _ in self.layout.buffers], [n for _, n in self.layout.buffers]
        )
        cfg = self.config
        self.sender = KVCacheStoreSendingThread(
            self.backend,
            self.guard,
            self.layout,
            cfg.save_queue_size,
            cfg.transfer_batch_keys,
            self._on_saved,
        )
        self.recver = KVCacheStoreRecvingThread(
            self.backend,
            self.guard,
            self.layout,
            cfg.load_queue_size,
            cfg.transfer_batch_keys,
            self._on_loaded,
        )
        self.sender.start()
        self.recver.start()
        logger.info(
            "AscendStoreConnector %s: %d blocks of %d bytes in %d segment(s) each, on %s",
            self.guard.side,
            self.num_blocks,
            self.layout.bytes_per_block,
            self.layout.segments_per_block,
            self.device,
        )

    def _ready(self) -> tuple[KVCacheLayout, KVCacheStoreSendingThread, KVCacheStoreRecvingThread]:
        if self.layout is None or self.sender is None or self.recver is None:
            raise RuntimeError("register_kv_caches() must run before KV transfers")
        return self.layout, self.sender, self.recver

    # ---- loads ------------------------------------------------------------------------------

    def start_load_kv(self, meta: AscendConnectorMetadata) -> None:
        """Run the step's synchronous loads now; hand asynchronous ones to the receiving
        thread."""
        if not meta.loads:
            return
        layout, _, recver = self._ready()
        keys: list[str] = []
        block_ids: list[int] = []
        for load in meta.loads:
            load_keys = self.db.keys(load.block_hashes, self.tp_rank, self.pp_rank)
            if load.is_async:
                deadline = time.monotonic() + self.config.load_timeout_s
                task = TransferTask(load.req_id, load_keys, list(load.block_ids), None, deadline)
                with self._cond:
                    self._async_loads[load.req_id] = task
                if not recver.submit(task):
                    self.guard.log.warning(
                        "load_queue_full",
                        "KV pool load queue full (%d tasks): request %s recomputes its hit",
                        self.config.load_queue_size,
                        load.req_id,
                    )
                    self._on_loaded(task, len(load.block_ids), list(load.block_ids))
                continue
            keys.extend(load_keys)
            block_ids.extend(load.block_ids)
        if keys:
            failed = load_blocks(
                self.backend, self.guard, layout, keys, block_ids, self.config.transfer_batch_keys
            )
            self._count_loads(len(keys), failed)
            with self._cond:
                self._load_errors.update(failed)

    def _on_loaded(self, task: TransferTask, total: int, failed: list[int]) -> None:
        # Receiving thread (or the queue-full path): errors first, then completion, atomically,
        # so a request is never reported done before its failed blocks. A load past its
        # deadline was reported already (and its request may have a newer load): drop it.
        with self._cond:
            current = self._async_loads.get(task.req_id) is task
            if current:
                del self._async_loads[task.req_id]
                self._load_errors.update(failed)
                self._recv_done.add(task.req_id)
        if current:
            self._count_loads(total, failed)
        else:
            logger.info(
                "KV pool: load of request %s returned after its %.0f s deadline; dropped",
                task.req_id,
                self.config.load_timeout_s,
            )

    def _expire_loads(self) -> list[TransferTask]:
        # With self._cond held: report loads past their deadline as done with every block
        # failed; the receiving thread's late result is then dropped (_on_loaded).
        now = time.monotonic()
        expired = [
            t for t in self._async_loads.values() if t.deadline is not None and now >= t.deadline
        ]
        for task in expired:
            del self._async_loads[task.req_id]
            self._load_errors.update(task.block_ids)
            self._recv_done.add(task.req_id)
        return expired

    def _report_expired(self, expired: list[TransferTask]) -> None:
        for task in expired:
            self.recorder.add("load_failed_blocks", len(task.block_ids))
            self.guard.log.warning(
                "load_timeout",
                "KV pool: asynchronous load of request %s (%d block(s)) not done within "
                "load_timeout_s=%g s; it fails as a load error (kv_load_failure_policy applies)",
                task.req_id,
                len(task.block_ids),
                self.config.load_timeout_s,
            )

    def _count_loads(self, total: int, failed: Sequence[int]) -> None:
        self.recorder.add("loaded_blocks", total - len(failed))
        self.recorder.add("load_failed_blocks", len(failed))
        if failed:
            self.guard.log.warning(
                "load_failed",
                "KV pool: %d block(s) failed to load (missing or unreadable); vLLM recomputes "
                "them or fails their requests per kv_load_failure_policy",
                len(failed),
            )

    # ---- saves ------------------------------------------------------------------------------

    def wait_for_save(self, meta: AscendConnectorMetadata) -> None:
        """Queue the step's saves behind the end of its forward pass; never blocks on the
        store."""
        if not meta.saves:
            return
        _, sender, _ = self._ready()
        assert self.device is not None
        ready = self.device.record_event()
        for save in meta.saves:
            keys = self.db.keys(save.block_hashes, self.tp_rank, self.pp_rank)
            with self._cond:
                self._tracked.add(save.req_id)
                self._pending_saves[save.req_id] = self._pending_saves.get(save.req_id, 0) + 1
            task = TransferTask(save.req_id, keys, list(save.block_ids), ready)
            if not sender.submit(task):
                self.guard.log.warning(
                    "save_queue_full",
                    "KV pool save queue full (%d tasks): dropped the save of %d block(s)",
                    self.config.save_queue_size,
                    len(keys),
                )
                self._on_saved(task, 0, {0: len(keys)})

    def _on_saved(self, task: TransferTask, stored: int, failures: dict[int, int]) -> None:
        with self._cond:
            left = self._pending_saves.get(task.req_id, 0) - 1
            if left > 0:
                self._pending_saves[task.req_id] = left
            else:
                self._pending_saves.pop(task.req_id, None)
            self.recorder.add("saved_blocks", stored)
            self.recorder.add("save_failed_blocks", sum(failures.values()))
            self._cond.notify_all()
        store_codes = {code: n for code, n in failures.items() if code != 0}
        if store_codes:
            self.guard.log.warning(
                "save_failed",
                "KV pool (%s): %d block(s) not saved, by store code: %s (the pool is full or "
                "evicting; they are recomputed when needed)",
                self.backend.name,
                sum(store_codes.values()),
                store_codes,
            )

    def handle_preemptions(self, meta: AscendConnectorMetadata) -> None:
        """Wait until the queued saves of preempted requests are done: their blocks are about
        to be reused."""
        if not meta.preempted_req_ids:
            return
        deadline = time.monotonic() + self.config.shutdown_timeout_s
        with self._cond:
            for req_id in meta.preempted_req_ids:
                while self._pending_saves.get(req_id, 0) > 0:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        logger.error(
                            "KV pool: saves of preempted request %s still pending after %.0f s",
                            req_id,
                            self.config.shutdown_timeout_s,
                        )
                        return
                    self._cond.wait(left)

    # ---- completion -------------------------------------------------------------------------

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        """`(finished_sending, finished_recving)`: finished requests whose saves are all done,
        and requests whose asynchronous load is done or past its deadline (then failed)."""
        with self._cond:
            self._finished.update(r for r in finished_req_ids if r in self._tracked)
            sending = {r for r in self._finished if r not in self._pending_saves}
            self._finished -= sending
            self._tracked -= sending
            expired = self._expire_loads() if self._async_loads else []
            recving, self._recv_done = self._recv_done, set()
        self._report_expired(expired)
        return sending or None, recving or None

    def get_block_ids_with_load_errors(self) -> set[int]:
        """KV cache blocks whose load failed since the last call (then forgotten)."""
        with self._cond:
            errors, self._load_errors = self._load_errors, set()
        return errors

    def stats(self) -> dict[str, Any]:
        """Counter totals and queue state, for tests and diagnostics (vLLM's metrics read
        `take_stats`)."""
        with self._cond:
            pending = sum(self._pending_saves.values())
        return {
            **self.recorder.snapshot(),
            "pending_saves": pending,
            "pool_healthy": self.guard.healthy,
        }

    def take_stats(self) -> AscendStoreStats | None:
        """This worker's counter increases since the last call (vLLM's metrics)."""
        self.recorder.add("pool_failures", self.guard.take_failures())
        return self.recorder.take()

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until no save is pending (tests, benchmarks); False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._pending_saves:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def shutdown(self) -> None:
        """Finish queued saves (bounded by `shutdown_timeout_s`), stop the threads, disconnect."""
        timeout = self.config.shutdown_timeout_s
        for thread in (self.sender, self.recver):
            if thread is not None and not thread.stop(timeout):
                logger.warning("KV pool: %s did not stop within %.0f s", thread.name, timeout)
        self.backend.close()
