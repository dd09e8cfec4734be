"""`KVConnectorFacade`: the role-split shape shared by vllm-ascend's own KV connectors.

vLLM builds a connector once per process, with a `KVConnectorRole`: `SCHEDULER` in the scheduler
process, `WORKER` in each worker. Each connector here keeps the logic of a role in an object of
its own (a *scheduler side* and a *worker side*), so the connector class is a thin facade: by
role it holds one side and forwards each `KVConnectorBase_V1` method to the side that owns it.
This base holds that facade once:

- construction: the connector's settings (`_load_config`), then the side of this role
  (`_make_scheduler` or `_make_worker`), stored as `self.config`, `self.scheduler`,
  `self.worker` (the other side stays None);
- `_scheduler()` / `_worker()`: the side, asserting that the method was called on the role
  that owns it;
- `_step_metadata(kind)`: the step's bound connector metadata, checked to be of `kind`;
- the methods whose forwarding is the same in every connector (`register_kv_caches`,
  `get_block_ids_with_load_errors`, `get_num_new_matched_tokens`, `update_state_after_alloc`,
  `build_connector_meta`) and `shutdown` (shuts down the side this process holds);
- vLLM's metrics hooks: `get_kv_connector_stats` (the side's `take_stats()`), and the
  classmethods `build_kv_connector_stats` / `build_prom_metrics` for the family's
  `stats_class` (`connector_stats.py`).

A subclass sets `stats_class`, implements the three factory hooks and the abstract per-step
methods of `KVConnectorBase_V1` (`start_load_kv`, `wait_for_layer_load`, `save_kv_layer`,
`wait_for_save`), whose meaning differs per connector, and overrides any other method it
forwards differently (`get_finished`, `request_finished`, ...). A connector that moves whole
steps, never single layers, takes the two per-layer methods from `WholeStepTransfers`.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)

from vllm_ascend.distributed.kv_transfer.utils.connector_stats import (
    CounterPromMetrics,
    CounterStats,
)

if TYPE_CHECKING:
    import torch
    from vllm.config import VllmConfig
    from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (
        KVConnectorPromMetrics,
        KVConnectorStats,
        PromMetric,
        PromMetricT,
    )
    from vllm.v1.attention.backend import AttentionMetadata
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

__all__ = ["KVConnectorFacade", "SchedulerSide", "WholeStepTransfers", "WorkerSide"]


class SchedulerSide(Protocol):
    """What the facade forwards to a connector's scheduler-side object."""

    def get_num_new_matched_tokens(
        self, request: Request, num_computed_tokens: int
    ) -> tuple[int | None, bool]: ...

    def update_state_after_alloc(
        self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int
    ) -> None: ...

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata: ...

    def take_stats(self) -> CounterStats | None: ...

    def shutdown(self) -> None: ...


class WorkerSide(Protocol):
    """What the facade forwards to a connector's worker-side object."""

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None: ...

    def get_block_ids_with_load_errors(self) -> set[int]: ...

    def take_stats(self) -> CounterStats | None: ...

    def shutdown(self) -> None: ...


ConfigT = TypeVar("ConfigT")
SchedulerT = TypeVar("SchedulerT", bound=SchedulerSide)
WorkerT = TypeVar("WorkerT", bound=WorkerSide)
MetadataT = TypeVar("MetadataT", bound=KVConnectorMetadata)


class KVConnectorFacade(KVConnectorBase_V1, Generic[ConfigT, SchedulerT, WorkerT]):
    """A `KVConnectorBase_V1` that routes each call to its scheduler or worker side.

    Args:
        vllm_config: the engine config; `kv_transfer_config` must be set (vLLM's base class
            raises `ValueError` otherwise).
        role: `KVConnectorRole.SCHEDULER` builds the scheduler side, any other role the
            worker side.
        kv_cache_config: the KV cache layout, handed to the side's factory.

    Raises:
        Whatever the subclass's `_load_config` and side factories raise (documented on each
        connector).
    """

    #: The family's counters (a `CounterStats` subclass), reported to vLLM's metrics.
    stats_class: ClassVar[type[CounterStats]] = CounterStats

    def __init__(
        self, vllm_config: VllmConfig, role: KVConnectorRole, kv_cache_config: KVCacheConfig
    ) -> None:
        super().__init__(vllm_config, role, kv_cache_config)
        self.config: ConfigT = self._load_config(vllm_config)
        self.scheduler: SchedulerT | None = None
        self.worker: WorkerT | None = None
        if role == KVConnectorRole.SCHEDULER:
            self.scheduler = self._make_scheduler(vllm_config, kv_cache_config)
        else:
            self.worker = self._make_worker(vllm_config, kv_cache_config)

    # ---- hooks ----------------------------------------------------------------------------

    @abstractmethod
    def _load_config(self, vllm_config: VllmConfig) -> ConfigT:
        """The connector's validated settings (runs first, on both roles)."""

    @abstractmethod
    def _make_scheduler(
        self, vllm_config: VllmConfig, kv_cache_config: KVCacheConfig
    ) -> SchedulerT:
        """The scheduler side (scheduler process only); `self.config` is set."""

    @abstractmethod
    def _make_worker(self, vllm_config: VllmConfig, kv_cache_config: KVCacheConfig) -> WorkerT:
        """The worker side (each worker process); `self.config` is set."""

    # ---- accessors ------------------------------------------------------------------------

    def _worker(self) -> WorkerT:
        assert self.worker is not None, "worker-side method called on the scheduler side"
        return self.worker

    def _scheduler(self) -> SchedulerT:
        assert self.scheduler is not None, "scheduler-side method called on a worker"
        return self.scheduler

    def _step_metadata(self, kind: type[MetadataT]) -> MetadataT:
        """The metadata vLLM bound for this step, which the scheduler side built as `kind`."""
        meta = self._get_connector_metadata()
        assert isinstance(meta, kind)
        return meta

    # ---- worker side ----------------------------------------------------------------------

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        self._worker().register_kv_caches(kv_caches)

    def get_block_ids_with_load_errors(self) -> set[int]:
        return self._worker().get_block_ids_with_load_errors()

    # ---- scheduler side -------------------------------------------------------------------

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

    # ---- both -----------------------------------------------------------------------------

    def get_kv_connector_stats(self) -> KVConnectorStats | None:
        """This side's counter increases since vLLM last asked (None: nothing grew)."""
        side: SchedulerT | WorkerT | None = (
            self.scheduler if self.scheduler is not None else self.worker
        )
        return side.take_stats() if side is not None else None

    @classmethod
    def build_kv_connector_stats(cls, data: dict[str, Any] | None = None) -> KVConnectorStats:
        """The family's stats object holding `data` (empty when None)."""
        return cls.stats_class(data=data) if data is not None else cls.stats_class()

    @classmethod
    def build_prom_metrics(
        cls,
        vllm_config: VllmConfig,
        metric_types: dict[type[PromMetric], type[PromMetricT]],
        labelnames: list[str],
        per_engine_labelvalues: dict[int, list[object]],
    ) -> KVConnectorPromMetrics:
        """One Prometheus counter per name of the family's `stats_class.COUNTERS`."""
        return CounterPromMetrics(
            cls.stats_class, vllm_config, metric_types, labelnames, per_engine_labelvalues
        )

    def shutdown(self) -> None:
        if self.scheduler is not None:
            self.scheduler.shutdown()
        if self.worker is not None:
            self.worker.shutdown()


class WholeStepTransfers:
    """The per-layer hooks of a connector that loads and saves all layers at once: they do
    nothing.

    Put it before the facade in the bases (`class C(WholeStepTransfers, KVConnectorFacade[...])`)
    so that its methods stand for `KVConnectorBase_V1`'s abstract ones. Its connectors load
    every layer before the forward pass (`start_load_kv`) or asynchronously before the request
    is scheduled, and save after the forward pass (`wait_for_save`), or leave the blocks for a
    reader to pull.
    """

    def wait_for_layer_load(self, layer_name: str) -> None:
        return

    def save_kv_layer(
        self,
        layer_name: str,
        kv_layer: torch.Tensor,
        attn_metadata: AttentionMetadata,
        **kwargs: Any,
    ) -> None:
        return
