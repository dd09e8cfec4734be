"""`MooncakeConnector`: vLLM disaggregated prefill over Mooncake (registered as
`MooncakeConnectorV1`).

Use it on both instances, e.g. for the decode instance::

    KVTransferConfig(
        kv_connector="MooncakeConnectorV1",
        kv_role="kv_consumer",          # "kv_producer" on the prefill instance
        kv_port=20001,                  # side-channel base port (prefill instance)
        kv_connector_extra_config={"prefill": {"tp_size": 2}, "decode": {"tp_size": 1}},
    )

A proxy sends each request to the prefill instance with `max_tokens=1` and
`kv_transfer_params={"do_remote_decode": True}`, then forwards the `kv_transfer_params` of
that answer to the decode instance (`examples/pd_proxy.py`). The decode instance reads the
prompt's KV blocks from the prefill instance with batched Mooncake transfers and computes only
the last prompt token itself. Settings: `config.py`.

The class is a thin facade: by role it holds a `MooncakeConnectorScheduler` or a
`MooncakeConnectorWorker` and forwards each `KVConnectorBase_V1` method to the side that owns
it.
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
from vllm_ascend.distributed.kv_transfer.kv_p2p.metadata import MooncakeConnectorMetadata
from vllm_ascend.distributed.kv_transfer.kv_p2p.scheduler import MooncakeConnectorScheduler
from vllm_ascend.distributed.kv_transfer.kv_p2p.worker import MooncakeConnectorWorker

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.attention.backend import AttentionMetadata
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request

__all__ = ["MooncakeConnector", "MooncakeConnectorMetadata", "MooncakeConnectorV1"]


def tensor_parallel_rank() -> int:
    """This worker's TP rank (vLLM's parallel state is initialised before connectors)."""
    from vllm.distributed.parallel_state import get_tensor_model_parallel_rank

    return int(get_tensor_model_parallel_rank())


class MooncakeConnector(KVConnectorBase_V1):
    """Prefill/decode KV transfer: the decode instance reads the prefill instance's blocks.

    Args:
        vllm_config: the engine config; `kv_transfer_config` holds the role, port and
            `kv_connector_extra_config`.
        role: scheduler or worker.
        kv_cache_config: the KV cache layout (number of blocks).

    Raises:
        ValueError: bad `kv_connector_extra_config` (unknown key, wrong type), an
            unsupported prefill/decode TP pairing, or pipeline parallelism.
    """

    _cache_hit_source = CacheHitSource.P2P

    def __init__(
        self, vllm_config: VllmConfig, role: KVConnectorRole, kv_cache_config: KVCacheConfig
    ) -> None:
        super().__init__(vllm_config, role, kv_cache_config)
        self.config = MooncakeP2PConfig.from_vllm_config(vllm_config)
        self.scheduler: MooncakeConnectorScheduler | None = None
        self.worker: MooncakeConnectorWorker | None = None
        if role == KVConnectorRole.SCHEDULER:
            self.scheduler = MooncakeConnectorScheduler(self.config)
        else:
            self.worker = MooncakeConnectorWorker(
                self.config, tensor_parallel_rank(), kv_cache_config.num_blocks
            )

    # ---- worker side ----------------------------------------------------------------------

    def _worker(self) -> MooncakeConnectorWorker:
        assert self.worker is not None, "worker-side method called on the scheduler side"
        return self.worker

    def _meta(self) -> MooncakeConnectorMetadata:
        meta = self._get_connector_metadata()
        assert isinstance(meta, MooncakeConnectorMetadata)
        return meta

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        self._worker().register_kv_caches(kv_caches)

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        meta = self._meta()
        worker = self._worker()
        worker.add_sends(meta.send)
        worker.add_recvs(meta.recv)

    def wait_for_layer_load(self, layer_name: str) -> None:
        # Loads are asynchronous and complete before the request is scheduled.
        return

    def save_kv_layer(
        self,
        layer_name: str,
        kv_layer: torch.Tensor,
        attn_metadata: AttentionMetadata,
        **kwargs: Any,
    ) -> None:
        # The decode side reads finished blocks; nothing is pushed per layer.
        return

    def wait_for_save(self) -> None:
        return

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        return self._worker().get_finished()

    def get_block_ids_with_load_errors(self) -> set[int]:
        return self._worker().get_block_ids_with_load_errors()

    # ---- scheduler side -------------------------------------------------------------------

    def _scheduler(self) -> MooncakeConnectorScheduler:
        assert self.scheduler is not None, "scheduler-side method called on a worker"
        return self.scheduler

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
        """Counters of this side (scheduler: hand-offs and held blocks; worker: reads)."""
        side = self.scheduler or self.worker
        assert side is not None
        return dict(side.stats())

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.shutdown()


# The name this connector is registered under (DESIGN §6): vLLM resolves `kv_connector` as an
# attribute of `kv_connector_module_path` first.
MooncakeConnectorV1 = MooncakeConnector
