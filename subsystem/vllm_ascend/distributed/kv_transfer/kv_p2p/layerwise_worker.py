"""Worker side of the layerwise Mooncake connector (push mode).

Every worker registers its KV cache with the process-wide transfer engine and serves the side
channel on `kv_port + dp_rank * tp_size + tp_rank` (both roles: the prefill worker receives
`PushRequest`s, the decode worker `LayerDone`s). The decode half (registering loads, waiting
for layers) is `layerwise_loads.py`, the prefill half (pushing layers) `layerwise_pushes.py`;
this class joins them and answers the connector's per-step calls.
"""

from __future__ import annotations

from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_layout import KVLayout
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_loads import LayerwiseLoads
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_metadata import LayerwiseMetadata
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_pushes import LayerwisePushes
from vllm_ascend.distributed.kv_transfer.kv_p2p.messages import (
    Ack,
    LayerDone,
    Message,
    PushRequest,
    Withheld,
)
from vllm_ascend.distributed.kv_transfer.utils.device import resolve_device

__all__ = ["MooncakeLayerwiseWorker"]


class MooncakeLayerwiseWorker(LayerwiseLoads, LayerwisePushes):
    """One worker's half of the layerwise connector (shared state and steps:
    `worker_base.py`).

    Args:
        config: the connector's settings.
        tp_rank: this worker's tensor-parallel rank.
        num_blocks: KV cache blocks (`KVCacheConfig.num_blocks`).
    """

    service_name = "mooncake-layerwise"

    def _registered(self, layout: KVLayout) -> None:
        self.device = resolve_device(layout.tensors)

    def _handle(self, message: Message) -> Message | None:
        if isinstance(message, PushRequest) and self.config.is_producer:
            return self._register_reader(message)
        if isinstance(message, LayerDone) and self.config.is_consumer:
            self._layer_arrived(message)
            return Ack()
        if isinstance(message, Withheld) and self.config.is_consumer:
            self._withheld_by(message)
            return Ack()
        return None

    def bind(self, meta: LayerwiseMetadata) -> None:
        """Take this step's metadata (called from `start_load_kv`, before the forward)."""
        self.start_saves(meta.saves, meta.sends)
        if meta.withheld:
            self.withhold(meta.withheld)
        self.start_loads(meta.loads, meta.releases)

    def get_finished(self) -> tuple[set[str] | None, set[str] | None]:
        """`(finished sends, finished loads)`: prefill requests whose pushes are done (or
        expired), decode requests whose layers all arrived (or whose load failed)."""
        recving = self._finished_loads()
        if not self.config.is_producer:
            return None, recving or None
        finished = self._pop_finished_sends(
            "prefill request %s: its KV was not delivered within %.0f s; freeing its blocks"
        )
        self._forget_pushes(finished)
        return finished or None, recving or None

    def stats(self) -> dict[str, float]:
        """Counters of this worker (loads, pushes, readers, sends)."""
        return self._send_stats()

    def shutdown(self) -> None:
        """Stop serving and pushing; deregister the KV cache when no load of this worker is
        still registered with a prefill peer and no push is tracked (either could still move
        bytes through it). Otherwise it stays registered with the engine."""
        self._stop_serving()
        with self._load_cond:
            receiving = bool(self._loads)
        with self._push_lock:
            pushing = bool(self._pushes)
        if not receiving and not pushing:
            self._release_memory()
