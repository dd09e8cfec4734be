"""Worker side of the CPU offload connector: moves KV cache blocks to and from host memory.

The host pool mirrors the worker's KV cache tensors, each with `num_cpu_blocks` blocks instead
of `num_blocks` (pinned memory on an accelerator, through the device abstraction). Per step:

- `start_load_kv`: one batched copy host -> KV cache for every load of the step, before the
  forward pass reads those blocks;
- `wait_for_save`: one batched copy KV cache -> host for every block that became full, then a
  device synchronisation, then one `StepDone` message (sent, its reply not awaited) telling
  the metadata server which host blocks now hold data (a block is offered to lookups only once
  every worker reported it).

The host pool is allocated on first use, after asking the metadata server for its size: the
scheduler side, which owns the pool, is created after the workers register their KV caches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.config import CPUOffloadConfig
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.metadata import (
    MetadataClient,
    Register,
    StepDone,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.stats import CPUOffloadStats
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.step_metadata import (
    BlockTransfer,
    CPUOffloadingConnectorMetadata,
)
from vllm_ascend.distributed.kv_transfer.utils.block_copy import (
    BlockCopier,
    BlockTensor,
    host_mirror,
    stack_layers,
)
from vllm_ascend.distributed.kv_transfer.utils.connector_stats import StatsRecorder
from vllm_ascend.distributed.kv_transfer.utils.device import (
    KVDevice,
    resolve_device,
    unique_kv_tensors,
)
from vllm_ascend.logger import init_logger

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

# `unique_kv_tensors` lives in `utils/device.py`; it stays importable from here.
__all__ = ["CPUOffloadingWorker", "unique_kv_tensors"]

logger = init_logger(__name__)


class CPUOffloadingWorker:
    """Worker-side logic; `CPUOffloadingConnector` forwards the worker methods here.

    Args:
        config: the connector's validated extra config.
        num_blocks: blocks of the KV cache (`KVCacheConfig.num_blocks`).
        rank: this worker's rank in the engine (0 .. world_size - 1).
        world_size: workers in the engine.
    """

    def __init__(self, config: CPUOffloadConfig, num_blocks: int, rank: int, world_size: int):
        self.config = config
        self.num_blocks = num_blocks
        self.rank = rank
        self.world_size = world_size
        self.client = MetadataClient(
            config.metadata_server_address, config.rpc_timeout_s, f"worker{rank}"
        )
        self.device: KVDevice | None = None
        self._device_tensors: list[BlockTensor] = []
        # KV cache -> host and host -> KV cache, planned once the host pool exists.
        self._saver: BlockCopier | None = None
        self._loader: BlockCopier | None = None
        self.num_cpu_blocks = 0
        self._load_errors: set[int] = set()
        self._step_loaded = 0
        self._step_load_failed = 0
        self.recorder = StatsRecorder(CPUOffloadStats)

    @property
    def bytes_per_block(self) -> int:
        return sum(t.bytes_per_block for t in self._device_tensors)

    def register_kv_caches(
        self, kv_caches: Mapping[str, torch.Tensor | Sequence[torch.Tensor]]
    ) -> None:
        """Remember the KV cache tensors and where their block axis is.

        Raises:
            ValueError: a tensor without a block axis of `num_blocks`, or a capacity below one
                block (checked here too, so a bad config fails before the model warms up).
        """
        tensors = unique_kv_tensors(kv_caches)
        self.device = resolve_device(tensors)
        # One buffer for all layers (vLLM's allocation) becomes one strided tensor: a block of
        # every layer then moves in one copy.
        self._device_tensors = stack_layers(tensors, self.num_blocks)
        self.config.num_cpu_blocks(self.bytes_per_block)

    def _ensure_host_pool(self) -> tuple[BlockCopier, BlockCopier]:
        if self._saver is not None and self._loader is not None:
            return self._saver, self._loader
        if self.device is None:
            raise RuntimeError("register_kv_caches() must run before KV transfers")
        self.num_cpu_blocks = int(
            self.client.call(
                Register(
                    rank=self.rank, world_size=self.world_size, bytes_per_block=self.bytes_per_block
                )
            )
        )
        host = [
            host_mirror(d, self.num_cpu_blocks, self.device.empty_host)
            for d in self._device_tensors
        ]
        pairs = list(zip(self._device_tensors, host, strict=True))
        self._saver = BlockCopier(pairs)
        self._loader = BlockCopier([(h, d) for d, h in pairs])
        logger.info(
            "CPU offload worker %d: host pool of %d blocks (%d bytes) on %s, %s copies",
            self.rank,
            self.num_cpu_blocks,
            self.num_cpu_blocks * self.bytes_per_block,
            self.device,
            self._saver.mechanism,
        )
        return self._saver, self._loader

    # ---- vLLM worker-side API -------------------------------------------------------------

    def start_load_kv(self, meta: CPUOffloadingConnectorMetadata) -> None:
        """Copy this step's hits from the host pool into the KV cache (one batched copy)."""
        self._load_errors.update(meta.failed_load_block_ids)
        self._step_load_failed += len(meta.failed_load_block_ids)
        if not meta.loads:
            return
        _, loader = self._ensure_host_pool()
        assert self.device is not None
        host_ids, device_ids = _flatten(meta.loads)
        try:
            loader.copy(host_ids, device_ids, non_blocking=self.device.non_blocking)
        except (RuntimeError, ValueError, IndexError):
            logger.exception(
                "CPU offload worker %d: load of %d blocks failed", self.rank, len(host_ids)
            )
            self._load_errors.update(device_ids)
            self._step_load_failed += len(device_ids)
            return
        # The forward pass runs on the same stream after this, so it sees the loaded blocks
        # without a synchronisation here.
        self._step_loaded += len(device_ids)

    def wait_for_save(self, meta: CPUOffloadingConnectorMetadata) -> None:
        """Copy this step's full blocks to the host pool, wait for it, and report to the server.

        Stores are synchronous: when this returns the host copies are complete, so vLLM may
        free or reuse the source blocks right away.
        """
        stored: list[int] = []
        failed: list[int] = []
        if meta.stores:
            saver, _ = self._ensure_host_pool()
            assert self.device is not None
            host_ids, device_ids = _flatten(meta.stores)
            try:
                saver.copy(device_ids, host_ids, non_blocking=self.device.non_blocking)
                self.device.synchronize()
                stored = host_ids
            except (RuntimeError, ValueError, IndexError):
                logger.exception(
                    "CPU offload worker %d: store of %d blocks failed; skipped",
                    self.rank,
                    len(host_ids),
                )
                failed = host_ids
        if stored or failed or self._step_loaded or self._step_load_failed:
            for name, n in (
                ("loaded_blocks", self._step_loaded),
                ("load_failed_blocks", self._step_load_failed),
                ("stored_blocks", len(stored)),
                ("store_failed_blocks", len(failed)),
            ):
                self.recorder.add(name, n)
            # Sent without waiting: with the multiprocessing executor the reply comes from a
            # thread of the scheduler's process, which shares the GIL with that process's busy
            # wait for this worker (waiting for it was 3.6% of the worker's loop under `vllm
            # bench serve`; benchmarks/offload_stepdone_bench.py). Blocks become ready when the
            # server applies it; until then a lookup misses them.
            self.client.send(
                StepDone(
                    rank=self.rank,
                    stored=stored,
                    store_failed=failed,
                    loaded_blocks=self._step_loaded,
                    load_failed_blocks=self._step_load_failed,
                )
            )
            self._step_loaded = self._step_load_failed = 0

    def get_block_ids_with_load_errors(self) -> set[int]:
        """KV cache blocks whose load failed since the last call (then forgotten)."""
        errors, self._load_errors = self._load_errors, set()
        return errors

    def take_stats(self) -> CPUOffloadStats | None:
        """This worker's counter increases since the last call (vLLM's metrics)."""
        return self.recorder.take()

    def host_tensors(self) -> list[torch.Tensor]:
        """The host pool tensors (empty before first use); for tests and diagnostics."""
        return [] if self._saver is None else [h.tensor for _, h in self._saver.pairs]

    def shutdown(self) -> None:
        self.client.close()


def _flatten(transfers: list[BlockTransfer]) -> tuple[list[int], list[int]]:
    host: list[int] = []
    device: list[int] = []
    for t in transfers:
        host.extend(t.host_block_ids)
        device.extend(t.device_block_ids)
    return host, device
