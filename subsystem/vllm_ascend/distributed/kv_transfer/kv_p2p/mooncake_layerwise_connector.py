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

from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_metadata import LayerwiseMetadata
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_scheduler import (
    MooncakeLayerwiseScheduler,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_worker import MooncakeLayerwiseWorker
from vllm_ascend.distributed.kv_transfer.kv_p2p.p2p_connector import MooncakeP2PFacade

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from vllm.forward_context import ForwardContext
    from vllm.v1.attention.backend import AttentionMetadata
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.kv_cache_interface import KVCacheConfig

__all__ = ["LayerwiseMetadata", "MooncakeLayerwiseConnector"]


class MooncakeLayerwiseConnector(
    MooncakeP2PFacade[MooncakeLayerwiseScheduler, MooncakeLayerwiseWorker]
):
    """Layer-by-layer prefill/decode KV transfer over Mooncake (push mode).

    Args:
        vllm_config: the engine config (`kv_transfer_config` as for `MooncakeConnector`).
        role: scheduler or worker.
        kv_cache_config: the KV cache layout (number of blocks).

    Raises:
        ValueError: bad `kv_connector_extra_config`, an unsupported TP pairing, or pipeline
            parallelism.
    """

    def __init__(
        self, vllm_config: VllmConfig, role: KVConnectorRole, kv_cache_config: KVCacheConfig
    ) -> None:
        super().__init__(vllm_config, role, kv_cache_config)
        # The step metadata the worker side last took (`_bind_step`).
        self._bound: LayerwiseMetadata | None = None

    scheduler_class = MooncakeLayerwiseScheduler
    worker_class = MooncakeLayerwiseWorker

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config: dict[str, Any]) -> bool:
        # wait_for_layer_load/save_kv_layer run between layers: graphs must leave room.
        return True

    # ---- worker side ----------------------------------------------------------------------

    def _bind_step(self) -> None:
        # vLLM calls start_load_kv after the forward when a step has no synchronous load,
        # but save_kv_layer runs during it: take the step's metadata on first use.
        meta = self._step_metadata(LayerwiseMetadata)
        if meta is not self._bound:
            self._bound = meta
            self._worker().bind(meta)

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

    # ---- scheduler side -------------------------------------------------------------------

    def bind_kv_cache_manager(self, kv_cache_manager: KVCacheManager) -> None:
        super().bind_kv_cache_manager(kv_cache_manager)
        self._scheduler().kv_cache_manager = kv_cache_manager
