"""`CPUOffloadingConnector`: offload finished KV cache blocks to host memory and load prefix
hits back, for vLLM's v1 engine (`KVConnectorBase_V1`).

Use it with
`KVTransferConfig(kv_connector="CPUOffloadingConnector", kv_role="kv_both",
kv_connector_extra_config={"cpu_capacity_gib": 8})` (keys: `config.py`). vLLM finds the name
through `vllm_ascend.register_connector` (entry point `vllm.general_plugins`), or directly with
`kv_connector_module_path` set to this module.

The connector is a thin facade (`utils/connector_facade.py`): by role it holds a
`CPUOffloadingScheduler` (scheduler process) or a `CPUOffloadingWorker` (each worker) and
forwards each `KVConnectorBase_V1` method to the side that owns it. The two sides share state
through the metadata server (`metadata.py`), started by the scheduler side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vllm.v1.metrics.cache_hit_source import CacheHitSource

from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.config import CPUOffloadConfig
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.scheduler import (
    CPUOffloadingScheduler,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.stats import CPUOffloadStats
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.step_metadata import (
    CPUOffloadingConnectorMetadata,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.worker import CPUOffloadingWorker
from vllm_ascend.distributed.kv_transfer.utils.connector_facade import (
    KVConnectorFacade,
    WholeStepTransfers,
)

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

__all__ = ["CPUOffloadingConnector", "CPUOffloadingConnectorMetadata"]


class CPUOffloadingConnector(
    WholeStepTransfers,
    KVConnectorFacade[CPUOffloadConfig, CPUOffloadingScheduler, CPUOffloadingWorker],
):
    """Host-memory KV cache tier behind vLLM's prefix cache.

    Args:
        vllm_config: the engine config; its `kv_transfer_config.kv_connector_extra_config`
            holds the connector's settings.
        role: scheduler or worker.
        kv_cache_config: the KV cache layout (sizes the host pool).

    Raises:
        ValueError: bad `kv_connector_extra_config` (unknown key, non-positive capacity,
            capacity below one block) or an unsupported KV cache layout.
    """

    _cache_hit_source = CacheHitSource.HOST
    stats_class = CPUOffloadStats

    def _load_config(self, vllm_config: VllmConfig) -> CPUOffloadConfig:
        transfer = self._kv_transfer_config
        return CPUOffloadConfig.from_extra_config(
            transfer.kv_connector_extra_config,
            engine_id=str(transfer.engine_id),
            dp_rank=vllm_config.parallel_config.data_parallel_rank,
        )

    def _make_scheduler(
        self, vllm_config: VllmConfig, kv_cache_config: KVCacheConfig
    ) -> CPUOffloadingScheduler:
        return CPUOffloadingScheduler(vllm_config, kv_cache_config, self.config)

    def _make_worker(
        self, vllm_config: VllmConfig, kv_cache_config: KVCacheConfig
    ) -> CPUOffloadingWorker:
        from vllm.distributed.parallel_state import get_world_group

        group = get_world_group()
        return CPUOffloadingWorker(
            self.config, kv_cache_config.num_blocks, group.rank_in_group, group.world_size
        )

    @property
    def requires_kv_delivery(self) -> bool:
        # A best-effort cache: a store dropped by preemption is a later cache miss.
        return False

    # ---- worker side ----------------------------------------------------------------------

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        self._worker().start_load_kv(self._step_metadata(CPUOffloadingConnectorMetadata))

    # Nothing per layer (WholeStepTransfers): start_load_kv loads every layer before the
    # forward pass, and wait_for_save stores them all in one batched copy per step.

    def wait_for_save(self) -> None:
        self._worker().wait_for_save(self._step_metadata(CPUOffloadingConnectorMetadata))

    # ---- scheduler side -------------------------------------------------------------------

    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        self._scheduler().request_finished(request)
        return False, None

    def reset_cache(self) -> bool | None:
        return self._scheduler().reset_cache()
