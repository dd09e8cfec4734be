"""`AscendStoreConnector`: a KV cache pool shared by vLLM engines, on Mooncake or MemCache.

Engines serving the same model save the KV of full prompt blocks to a distributed store and
load prefixes other engines (or their own earlier runs) computed, for vLLM's v1 engine
(`KVConnectorBase_V1`). Use it with::

    KVTransferConfig(
        kv_connector="AscendStoreConnector",  # or "MooncakeConnectorStoreV1"
        kv_role="kv_both",
        kv_load_failure_policy="recompute",  # a block evicted after lookup is recomputed
        kv_connector_extra_config={
            "backend": "mooncake",
            "mooncake": {"master_server_address": "10.0.0.1:50051",
                         "global_segment_size": "4GB"},
        },
    )

(keys: `config_data.py`; store settings: `backend/mooncake_backend.py`,
`backend/memcache_backend.py`). vLLM finds the names through `vllm_ascend.register_connector`
(entry point `vllm.general_plugins`), or with `kv_connector_module_path` set to this module;
the 0.13 path `vllm_ascend.distributed.kvpool.ascend_store_connector` still works through the
shims, with a deprecation warning.

The connector is a thin facade (`utils/connector_facade.py`): by role it holds a
`KVPoolScheduler` (scheduler process) or a `KVPoolWorker` (each worker) and forwards each
`KVConnectorBase_V1` method to the side that owns it. The pool is a cache: a store that is
down, full or evicting turns hits into misses and never fails a request (except a load that
fails after lookup under `kv_load_failure_policy="fail"`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.config_data import AscendStoreConfig
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_scheduler import (
    KVPoolScheduler,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_worker import KVPoolWorker
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.stats import AscendStoreStats
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.step_metadata import (
    AscendConnectorMetadata,
)
from vllm_ascend.distributed.kv_transfer.utils.connector_facade import (
    KVConnectorFacade,
    WholeStepTransfers,
)

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request

__all__ = ["AscendConnectorMetadata", "AscendStoreConnector", "MooncakeConnectorStoreV1"]


class AscendStoreConnector(
    WholeStepTransfers, KVConnectorFacade[AscendStoreConfig, KVPoolScheduler, KVPoolWorker]
):
    """KV cache pool connector (see the module docstring).

    Args:
        vllm_config: the engine config; `kv_transfer_config.kv_connector_extra_config` holds
            the connector's settings.
        role: scheduler or worker.
        kv_cache_config: the KV cache layout.

    Raises:
        ValueError: bad `kv_connector_extra_config` or store settings (the message names the
            key and the value), or an unsupported KV cache layout.
        BackendError: the store cannot be reached (one line naming the address).
        ImportError: the selected store's package is missing.
    """

    stats_class = AscendStoreStats

    def _load_config(self, vllm_config: VllmConfig) -> AscendStoreConfig:
        return AscendStoreConfig.from_extra_config(
            self._kv_transfer_config.kv_connector_extra_config
        )

    def _make_scheduler(
        self, vllm_config: VllmConfig, kv_cache_config: KVCacheConfig
    ) -> KVPoolScheduler:
        return KVPoolScheduler(vllm_config, kv_cache_config, self.config)

    def _make_worker(self, vllm_config: VllmConfig, kv_cache_config: KVCacheConfig) -> KVPoolWorker:
        return KVPoolWorker(vllm_config, kv_cache_config, self.config)

    @property
    def requires_kv_delivery(self) -> bool:
        # A cache: a save dropped by preemption is a later miss, never a lost hand-off.
        return False

    # ---- worker side ------------------------------------------------------------------------

    def handle_preemptions(self, kv_connector_metadata: KVConnectorMetadata) -> None:
        assert isinstance(kv_connector_metadata, AscendConnectorMetadata)
        self._worker().handle_preemptions(kv_connector_metadata)

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        self._worker().start_load_kv(self._step_metadata(AscendConnectorMetadata))

    # Nothing per layer (WholeStepTransfers): synchronous loads complete in start_load_kv and
    # blocks are saved after the forward pass (wait_for_save), every layer at once.

    def wait_for_save(self) -> None:
        self._worker().wait_for_save(self._step_metadata(AscendConnectorMetadata))

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        return self._worker().get_finished(finished_req_ids)

    # ---- scheduler side ---------------------------------------------------------------------

    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        return self._scheduler().request_finished(request), None

    def update_connector_output(self, connector_output: KVConnectorOutput) -> None:
        self._scheduler().update_connector_output(connector_output)


# The name the 0.13 layout registered (docs/architecture.md, "Subsystem": vLLM resolves
# `kv_connector` as an attribute of `kv_connector_module_path` first).
MooncakeConnectorStoreV1 = AscendStoreConnector
