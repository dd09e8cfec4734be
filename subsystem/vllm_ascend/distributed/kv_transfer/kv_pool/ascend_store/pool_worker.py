"""Worker side of the KV pool: moves KV cache blocks between this worker's KV cache and the pool.

Each worker stores its own slice of a block (its TP rank's heads, its PP rank's layers) under
its own key. Per step:

- `start_load_kv`: synchronous loads are read into the KV cache before the forward pass that
  needs them, in batched store calls on a loading thread the step waits on for at most
  `sync_load_timeout_s` (past it the blocks fail as load errors, and their requests keep their
  blocks until the call returns: it may still write into them); asynchronous loads go to the
  receiving thread, and the request is reported in `finished_recving` once they are done.
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

The bookkeeping lives beside this module: `save_tracker.SaveTracker` (saves per request),
`load_tracker.LoadTracker` (load errors, asynchronous loads and their deadlines).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import Backend
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.block_layout import KVCacheLayout
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.config_data import (
    AscendStoreConfig,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.kv_transfer import (
    KVCacheStoreRecvingThread,
    KVCacheStoreSendingThread,
    TransferTask,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.load_tracker import LoadTracker
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_client import open_pool
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.save_tracker import SaveTracker
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.stats import AscendStoreStats
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.step_metadata import (
    AscendConnectorMetadata,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.sync_loads import SyncLoads
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
        self.recorder = StatsRecorder(AscendStoreStats)
        self.saves = SaveTracker(self.recorder, self.guard.log, self.backend.name)
        self.loads = LoadTracker(self.recorder, self.guard.log, config.load_timeout_s)
        self.sync_loads = SyncLoads(self.backend, self.guard, self.saves, config)

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
            self.saves.finish,
        )
        self.recver = KVCacheStoreRecvingThread(
            self.backend,
            self.guard,
            self.layout,
            cfg.load_queue_size,
            cfg.transfer_batch_keys,
            self.loads.finish,
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
                self.loads.track(task)
                if not recver.submit(task):
                    self.guard.log.warning(
                        "load_queue_full",
                        "KV pool load queue full (%d tasks): request %s recomputes its hit",
                        self.config.load_queue_size,
                        load.req_id,
                    )
                    self.loads.finish(task, len(load.block_ids), list(load.block_ids))
                continue
            keys.extend(load_keys)
            block_ids.extend(load.block_ids)
        if keys:
            held = [load.req_id for load in meta.loads if not load.is_async]
            failed = self.sync_loads.load(layout, keys, block_ids, held)
            self.loads.finish_sync(len(keys), failed)

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
            self.saves.add(save.req_id)
            task = TransferTask(save.req_id, keys, list(save.block_ids), ready)
            if not sender.submit(task):
                self.guard.log.warning(
                    "save_queue_full",
                    "KV pool save queue full (%d tasks): dropped the save of %d block(s)",
                    self.config.save_queue_size,
                    len(keys),
                )
                self.saves.finish(task, 0, {0: len(keys)})

    def handle_preemptions(self, meta: AscendConnectorMetadata) -> None:
        """Wait until the queued saves of preempted requests are done: their blocks are about
        to be reused."""
        if not meta.preempted_req_ids:
            return
        late = self.saves.wait_for(meta.preempted_req_ids, self.config.shutdown_timeout_s)
        if late is not None:
            logger.error(
                "KV pool: saves of preempted request %s still pending after %.0f s",
                late,
                self.config.shutdown_timeout_s,
            )

    # ---- completion -------------------------------------------------------------------------

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        """`(finished_sending, finished_recving)`: finished requests whose saves are all done,
        and requests whose asynchronous load is done or past its deadline (then failed)."""
        sending = self.saves.pop_finished(finished_req_ids)
        recving = self.loads.pop_done()
        return sending or None, recving or None

    def get_block_ids_with_load_errors(self) -> set[int]:
        """KV cache blocks whose load failed since the last call (then forgotten)."""
        return self.loads.take_errors()

    def stats(self) -> dict[str, Any]:
        """Counter totals and queue state, for tests and diagnostics (vLLM's metrics read
        `take_stats`)."""
        return {
            **self.recorder.snapshot(),
            "pending_saves": self.saves.pending(),
            "pool_healthy": self.guard.healthy,
        }

    def take_stats(self) -> AscendStoreStats | None:
        """This worker's counter increases since the last call (vLLM's metrics)."""
        self.recorder.add("pool_failures", self.guard.take_failures())
        return self.recorder.take()

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until no save is pending (tests, benchmarks); False on timeout."""
        return self.saves.wait_idle(timeout_s)

    def shutdown(self) -> None:
        """Finish queued saves (bounded by `shutdown_timeout_s`), stop the threads, disconnect."""
        timeout = self.config.shutdown_timeout_s
        for thread in (self.sender, self.recver):
            if thread is not None and not thread.stop(timeout):
                logger.warning("KV pool: %s did not stop within %.0f s", thread.name, timeout)
        self.sync_loads.close()
        self.backend.close()
