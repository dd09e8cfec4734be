"""`MooncakeLayerwiseConnector`: prefill/decode disaggregation where the prefill instance
pushes each layer's KV to the decode instance as soon as that layer is computed.

The proxy sends a request to both instances at once with a shared `transfer_id`:
the prefill instance gets `{"do_remote_decode": true, "transfer_id": T}` (and `max_tokens=1`),
the decode instance `{"do_remote_prefill": true, "transfer_id": T, "remote_host": <prefill
side-channel host>, "remote_port": <its kv_port>, "tp_size": <its TP size>}`. The decode
instance schedules the request at once; its forward pass waits for each layer
(`wait_for_layer_load`) while the prefill instance computes and pushes (`save_kv_layer`).

Same settings (`config.py`), side channel and transfer engine as `MooncakeConnector`; both
instances serve a side channel here, so each needs its own `kv_port` on a shared host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)
from vllm.v1.metrics.cache_hit_source import CacheHitSource

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_metadata import LayerwiseMetadata
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_scheduler import (
    MooncakeLayerwiseScheduler,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_worker import MooncakeLayerwiseWorker
from vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector import tensor_parallel_rank

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.attention.backend import AttentionMetadata
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks, KVCacheManager
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request

__all__ = ["LayerwiseMetadata", "MooncakeLayerwiseConnector"]


class MooncakeLayerwiseConnector(KVConnectorBase_V1):
    """Layer-by-layer prefill/decode KV transfer over Mooncake (push mode).

    Args:
        vllm_config: the engine config (`kv_transfer_config` as for `MooncakeConnector`).
        role: scheduler or worker.
        kv_cache_config: the KV cache layout (number of blocks).

    Raises:
        ValueError: bad `kv_connector_extra_config`, an unsupported TP pairing, or pipeline
            parallelism.
    """

    _cache_hit_source = CacheHitSource.P2P

    def __init__(
        self, vllm_config: VllmConfig, role: KVConnectorRole, kv_cache_config: KVCacheConfig
    ) -> None:
        super().__init__(vllm_config, role, kv_cache_config)
        self.config = MooncakeP2PConfig.from_vllm_config(vllm_config)
        self.scheduler: MooncakeLayerwiseScheduler | None = None
        self.worker: MooncakeLayerwiseWorker | None = None
        self._bound: LayerwiseMetadata | None = None
        if role == KVConnectorRole.SCHEDULER:
            self.scheduler = MooncakeLayerwiseScheduler(self.config)
        else:
            self.worker = MooncakeLayerwiseWorker(
                self.config, tensor_parallel_rank(), kv_cache_config.num_blocks
            )

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config: dict[str, Any]) -> bool:
        # wait_for_layer_load/save_kv_layer run between layers: graphs must leave room.
        return True

    # ---- worker side ----------------------------------------------------------------------

    def _worker(self) -> MooncakeLayerwiseWorker:
        assert self.worker is not None, "worker-side method called on the scheduler side"
        return self.worker

    def _bind_step(self) -> None:
        # vLLM calls start_load_kv after the forward when a step has no synchronous load,
        # but save_kv_layer runs during it: take the step's metadata on first use.
        meta = self._get_connector_metadata()
        assert isinstance(meta, LayerwiseMetadata)
        if meta is not self._bound:
            self._bound = meta
            self._worker().bind(meta)

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        self._worker().register_kv_caches(kv_caches)

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        self._bind_step()

    def wait_for_layer_load(self, layer_name: str) -> None:
        self._bind_step()
        self._worker().wait_for_layer_load(layer_name)

    def save_kv_layer(
        self,
        layer_name: str,
        kv_layer: torch.Tensor,
        attn_metadata: AttentionMetadata,
        **kwargs: Any,
    ) -> None:
        self._bind_step()
        self._worker().save_kv_layer(layer_name)

    def wait_for_save(self) -> None:
        # Pushes run on transfer threads; the blocks stay held until get_finished says so.
        return

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        return self._worker().get_finished()

    def get_block_ids_with_load_errors(self) -> set[int]:
        return self._worker().get_block_ids_with_load_errors()

    # ---- scheduler side -------------------------------------------------------------------

    def _scheduler(self) -> MooncakeLayerwiseScheduler:
        assert self.scheduler is not None, "scheduler-side method called on a worker"
        return self.scheduler

    def bind_kv_cache_manager(self, kv_cache_manager: KVCacheManager) -> None:
        super().bind_kv_cache_manager(kv_cache_manager)
        self._scheduler().kv_cache_manager = kv_cache_manager

    def get_num_new_matched_tokens(
        self, request: Request, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        return self._scheduler().get_num_new_matched_tokens(request, num_computed_tokens)

    def update_state_after_alloc(
        self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int
    ) -> None:
        self._scheduler().update_state_after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata:
        return self._scheduler().build_connector_meta(scheduler_output)

    def update_connector_output(self, connector_output: KVConnectorOutput) -> None:
        self._scheduler().update_connector_output(connector_output)

    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        return self._scheduler().request_finished(request, block_ids)

    # ---- both -----------------------------------------------------------------------------

    def stats(self) -> dict[str, float]:
        """Counters of this side (scheduler: hand-offs and held blocks; worker: pushes)."""
        side = self.scheduler or self.worker
        assert side is not None
        return dict(side.stats())

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.shutdown()
