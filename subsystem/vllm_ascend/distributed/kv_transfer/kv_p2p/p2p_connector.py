"""`MooncakeP2PFacade`: the connector class shape both Mooncake P/D connectors share.

`MooncakeConnector` (pull) and `MooncakeLayerwiseConnector` (push) read the same settings
(`MooncakeP2PConfig`, `config.py`), count their hits as `CacheHitSource.P2P`, and forward the
same calls the same way beyond `KVConnectorFacade`: building their sides from their
`scheduler_class`/`worker_class`, `wait_for_save` (nothing to wait for), `get_finished` (both
directions come from the worker), `update_connector_output` and `request_finished` (the
scheduler holds a finished prefill request's blocks), vLLM's metrics (`MooncakeP2PStats`) and
`stats` (diagnostic totals with gauges, for tests). Each connector keeps only its own sides
and its per-step methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from vllm.v1.metrics.cache_hit_source import CacheHitSource

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig
from vllm_ascend.distributed.kv_transfer.kv_p2p.stats import MooncakeP2PStats
from vllm_ascend.distributed.kv_transfer.utils.connector_facade import (
    KVConnectorFacade,
    SchedulerSide,
    WorkerSide,
)

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request

__all__ = ["MooncakeP2PFacade", "P2PSchedulerSide", "P2PWorkerSide", "tensor_parallel_rank"]


def tensor_parallel_rank() -> int:
    """This worker's TP rank (vLLM's parallel state is initialised before connectors)."""
    from vllm.distributed.parallel_state import get_tensor_model_parallel_rank

    return int(get_tensor_model_parallel_rank())


class P2PSchedulerSide(SchedulerSide, Protocol):
    """A Mooncake P/D scheduler side (`scheduler_base.P2PSchedulerBase` and subclasses)."""

    def update_connector_output(self, connector_output: KVConnectorOutput) -> None: ...

    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]: ...

    def stats(self) -> dict[str, float]: ...


class P2PWorkerSide(WorkerSide, Protocol):
    """A Mooncake P/D worker side (`worker_base.P2PWorkerBase` and subclasses)."""

    def get_finished(self) -> tuple[set[str] | None, set[str] | None]: ...

    def stats(self) -> dict[str, float]: ...


SchedulerT = TypeVar("SchedulerT", bound=P2PSchedulerSide)
WorkerT = TypeVar("WorkerT", bound=P2PWorkerSide)


class MooncakeP2PFacade(KVConnectorFacade[MooncakeP2PConfig, SchedulerT, WorkerT]):
    """`KVConnectorFacade` with the calls both Mooncake P/D connectors forward alike.

    Raises:
        ValueError: bad `kv_connector_extra_config` (unknown key, wrong type), an unsupported
            prefill/decode TP pairing, or pipeline parallelism (`MooncakeP2PConfig`).
    """

    _cache_hit_source = CacheHitSource.P2P
    stats_class = MooncakeP2PStats
    # Set by each connector: its scheduler and worker classes, built from the shared settings.
    scheduler_class: Callable[[MooncakeP2PConfig], SchedulerT]
    worker_class: Callable[[MooncakeP2PConfig, int, int], WorkerT]

    def _load_config(self, vllm_config: VllmConfig) -> MooncakeP2PConfig:
        return MooncakeP2PConfig.from_vllm_config(vllm_config)

    def _make_scheduler(
        self, vllm_config: VllmConfig, kv_cache_config: KVCacheConfig
    ) -> SchedulerT:
        return type(self).scheduler_class(self.config)

    def _make_worker(self, vllm_config: VllmConfig, kv_cache_config: KVCacheConfig) -> WorkerT:
        return type(self).worker_class(
            self.config, tensor_parallel_rank(), kv_cache_config.num_blocks
        )

    # ---- worker side ----------------------------------------------------------------------

    def wait_for_save(self) -> None:
        # Pull: the decode side reads finished blocks. Push: pushes run on transfer threads.
        # Either way the blocks stay held until get_finished says so.
        return

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        return self._worker().get_finished()

    # ---- scheduler side -------------------------------------------------------------------

    def update_connector_output(self, connector_output: KVConnectorOutput) -> None:
        self._scheduler().update_connector_output(connector_output)

    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        return self._scheduler().request_finished(request, block_ids)

    # ---- both -----------------------------------------------------------------------------

    def stats(self) -> dict[str, float]:
        """Counters of this side (scheduler: hand-offs and held blocks; worker: its reads or
        pushes, and the sends it holds)."""
        side: P2PSchedulerSide | P2PWorkerSide | None = self.scheduler or self.worker
        assert side is not None
        return dict(side.stats())
