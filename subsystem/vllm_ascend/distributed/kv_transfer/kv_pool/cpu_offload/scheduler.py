"""Scheduler side of the CPU offload connector.

Per request it answers vLLM's "how many more prompt tokens can you provide?" from the host
pool, pins those blocks when vLLM allocates KV cache for them, and, every step, plans the store
of each block that becomes full. Every question to the pool goes through the metadata server
(`metadata.py`), which this side starts in its own process.

Loads are synchronous (done by the worker in `start_load_kv` of the same step), so
`get_num_new_matched_tokens` never returns `load_kv_async=True`, and stores finish inside
`wait_for_save` of the step that planned them, so `request_finished` never delays freeing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.config import CPUOffloadConfig
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.cpu_kv_cache_manager import (
    CPUKVCacheManager,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.metadata import (
    Acquire,
    Commit,
    Lookup,
    MetadataClient,
    MetadataServer,
    Reset,
    StoreRequest,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.stats import CPUOffloadStats
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.step_metadata import (
    BlockTransfer,
    CPUOffloadingConnectorMetadata,
)
from vllm_ascend.distributed.kv_transfer.utils.connector_stats import StatsRecorder
from vllm_ascend.distributed.kv_transfer.utils.scheduler_inputs import (
    bytes_per_block,
    scheduled_requests,
    single_group_block_size,
    track_allocated,
)
from vllm_ascend.logger import init_logger

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

__all__ = ["CPUOffloadingScheduler", "bytes_per_block_from_config"]

logger = init_logger(__name__)


def bytes_per_block_from_config(kv_cache_config: KVCacheConfig) -> int:
    """Bytes one KV cache block occupies on one worker, over all its layers.

    Raises:
        ValueError: the KV cache has no blocks.
    """
    return bytes_per_block(kv_cache_config)


@dataclass
class _RequestState:
    request: Request
    # KV cache block ids of group 0, as the worker's block table has them.
    block_ids: list[int] = field(default_factory=list)
    # Leading blocks already stored, being stored, or found in the pool.
    handled_blocks: int = 0


class CPUOffloadingScheduler:
    """Scheduler-side logic; `CPUOffloadingConnector` forwards the scheduler methods here.

    Args:
        vllm_config: the engine's config (block size, world size, KV role).
        kv_cache_config: the worker's KV cache layout, to size the host pool.
        config: the connector's validated extra config.

    Raises:
        ValueError: an unsupported KV cache (more than one KV cache group, hash blocks that
            differ from KV cache blocks) or a capacity below one block.
        MetadataServerError: the metadata server cannot bind its address.
    """

    def __init__(
        self, vllm_config: VllmConfig, kv_cache_config: KVCacheConfig, config: CPUOffloadConfig
    ) -> None:
        self.block_size = single_group_block_size(kv_cache_config, "CPUOffloadingConnector")
        transfer = vllm_config.kv_transfer_config
        assert transfer is not None
        self.load_enabled = transfer.is_kv_consumer
        self.store_enabled = transfer.is_kv_producer
        self.bytes_per_block = bytes_per_block_from_config(kv_cache_config)
        self.num_cpu_blocks = config.num_cpu_blocks(self.bytes_per_block)
        world_size = vllm_config.parallel_config.world_size
        manager = CPUKVCacheManager(self.num_cpu_blocks, world_size)
        self.server = MetadataServer(config.metadata_server_address, manager, self.bytes_per_block)
        self.server.start()
        self.client = MetadataClient(
            config.metadata_server_address, config.rpc_timeout_s, "scheduler"
        )
        logger.info(
            "CPU offload: %d host blocks of %d bytes (%d bytes) per worker, %d worker(s), "
            "metadata server %s",
            self.num_cpu_blocks,
            self.bytes_per_block,
            self.num_cpu_blocks * self.bytes_per_block,
            world_size,
            config.metadata_server_address,
        )
        self._requests: dict[str, _RequestState] = {}
        # req_id -> (first block, number of blocks) found by the last lookup.
        self._lookups: dict[str, tuple[int, int]] = {}
        self._step_loads: list[BlockTransfer] = []
        self._step_failed: list[int] = []
        self._step_pins: list[str] = []
        self.recorder = StatsRecorder(CPUOffloadStats)

    # ---- vLLM scheduler-side API ----------------------------------------------------------

    def get_num_new_matched_tokens(
        self, request: Request, num_computed_tokens: int
    ) -> tuple[int, bool]:
        """Tokens beyond `num_computed_tokens` that the host pool can provide (synchronously).

        Whole blocks only, and never the prompt's last token: vLLM must compute at least one
        token to produce logits. Cost: one RPC carrying the candidate block hashes.
        """
        self._lookups.pop(request.request_id, None)
        if not self.load_enabled:
            return 0, False
        hashes = request.block_hashes
        start = num_computed_tokens // self.block_size
        limit = min(len(hashes), (request.num_tokens - 1) // self.block_size)
        if limit <= start:
            return 0, False
        hits = self.client.call(Lookup(block_hashes=list(hashes[start:limit])))
        self.recorder.add("lookups")
        self.recorder.add("hit_blocks", hits)
        if hits == 0:
            return 0, False
        self._lookups[request.request_id] = (start, hits)
        return hits * self.block_size, False

    def update_state_after_alloc(
        self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int
    ) -> None:
        """Track the request; pin the host blocks of its hit and plan their load."""
        state, found = track_allocated(request, self._requests, _RequestState, self._lookups)
        if num_external_tokens == 0 or found is None:
            return
        req_id = request.request_id
        start, n = found
        n = min(n, num_external_tokens // self.block_size)
        block_ids = blocks.get_block_ids()[0]
        wanted: list[bytes] = list(request.block_hashes[start : start + n])
        host_ids = self.client.call(Acquire(owner=req_id, block_hashes=wanted))
        self._step_pins.append(req_id)
        got = len(host_ids)
        if got:
            self._step_loads.append(
                BlockTransfer(req_id, list(block_ids[start : start + got]), host_ids)
            )
        if got < n:
            missing = list(block_ids[start + got : start + n])
            self._step_failed.extend(missing)
            logger.warning(
                "CPU offload: request %s lost %d of %d host blocks between lookup and load; "
                "reporting them as load errors",
                req_id,
                len(missing),
                n,
            )
        state.handled_blocks = max(state.handled_blocks, start + n)

    def build_connector_meta(
        self, scheduler_output: SchedulerOutput
    ) -> CPUOffloadingConnectorMetadata:
        """This step's loads (planned at allocation) and stores (blocks full after this step).

        One RPC per step, and only when there is something to commit.
        """
        plans = [
            self._plan_store(state, done)
            for state, done in scheduled_requests(scheduler_output, self._requests)
        ]
        plans = [p for p in plans if p[2] > p[1]]

        stores: list[BlockTransfer] = []
        if plans or self._step_pins:
            requests = [
                StoreRequest(
                    owner=s.request.request_id, block_hashes=list(s.request.block_hashes[a:b])
                )
                for s, a, b in plans
            ]
            allocations, skipped = self.client.call(
                Commit(release=self._step_pins, stores=requests)
            )
            if skipped:
                self.recorder.add("store_skipped_blocks", skipped)
                logger.warning(
                    "CPU offload: host pool full, skipped storing %d block(s) this step", skipped
                )
            for (state, first, _), allocated in zip(plans, allocations, strict=True):
                if not allocated:
                    continue
                stores.append(
                    BlockTransfer(
                        state.request.request_id,
                        [state.block_ids[first + i] for i, _ in allocated],
                        [host for _, host in allocated],
                    )
                )
        meta = CPUOffloadingConnectorMetadata(
            loads=self._step_loads, stores=stores, failed_load_block_ids=self._step_failed
        )
        self._step_loads, self._step_failed, self._step_pins = [], [], []
        return meta

    def request_finished(self, request: Request) -> None:
        """Forget the request. Its stores finished in the step that planned them."""
        self._requests.pop(request.request_id, None)
        self._lookups.pop(request.request_id, None)

    def take_stats(self) -> CPUOffloadStats | None:
        """The scheduler side's counter increases since the last call (vLLM's metrics)."""
        return self.recorder.take()

    def reset_cache(self) -> bool:
        """Drop every offloaded block that no request holds."""
        self.client.call(Reset())
        return True

    def shutdown(self) -> None:
        self.client.close()
        self.server.stop()

    # ---- internals ------------------------------------------------------------------------

    def _plan_store(
        self, state: _RequestState, computed_after_step: int
    ) -> tuple[_RequestState, int, int]:
        # Blocks whose KV is complete after this step, that have a hash and a KV cache block.
        if not self.store_enabled:
            return state, 0, 0
        full = min(
            computed_after_step // self.block_size,
            len(state.request.block_hashes),
            len(state.block_ids),
        )
        first = state.handled_blocks
        state.handled_blocks = max(first, full)
        return state, first, full
