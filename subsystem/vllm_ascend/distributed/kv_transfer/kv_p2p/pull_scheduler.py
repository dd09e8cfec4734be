"""Scheduler side of the Mooncake P/D connector (pull mode: the decode side reads).

Decode instance (`kv_consumer`/`kv_both`): a request whose `kv_transfer_params` say
`do_remote_prefill` reports all its prompt tokens beyond the local prefix-cache hit as
externally computed, loaded asynchronously. vLLM parks it in `WAITING_FOR_REMOTE_KVS`,
allocates its blocks and calls `update_state_after_alloc`, which queues a `RecvRequest` for the
workers (unhashed blocks to fill, the prefill location). A request aborted before allocation
still queues a `RecvRequest` with no blocks, so the workers tell the prefill instance to free
its blocks at once instead of at the send timeout.

Prefill instance (`kv_producer`/`kv_both`): a request with `do_remote_decode` that finished
normally keeps its blocks (`request_finished` returns True) and returns the parameters the
decode instance needs. The workers free them when every expected reader reported `ReadDone`,
or when `send_timeout_s` passes (no leak when a decode instance never reads).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig
from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_params import (
    RecvRequest,
    RemotePrefill,
    parse_remote_prefill,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.pull_metadata import MooncakeConnectorMetadata
from vllm_ascend.distributed.kv_transfer.kv_p2p.scheduler_base import (
    HANDOFF_STATES,
    P2PSchedulerBase,
)

if TYPE_CHECKING:
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.request import Request

__all__ = ["MooncakeConnectorScheduler"]


class MooncakeConnectorScheduler(P2PSchedulerBase):
    """Scheduler-side state: requests to read on the decode side, blocks held on the prefill
    side (`held`, shared with the layerwise scheduler in `scheduler_base.py`).

    Args:
        config: the connector's settings.
    """

    def __init__(self, config: MooncakeP2PConfig) -> None:
        super().__init__(config)
        self._recv: list[RecvRequest] = []
        self._send: dict[str, float] = {}

    # ---- decode side ----------------------------------------------------------------------

    def _parse_remote(self, params: dict[str, Any]) -> RemotePrefill:
        return parse_remote_prefill(params)

    def _queue_release(self, request_id: str, remote: RemotePrefill) -> None:
        self._recv.append(RecvRequest(request_id, [], remote))

    def update_state_after_alloc(
        self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int
    ) -> None:
        remote = self._remote_prefill(request)
        if remote is None:
            return
        assert request.kv_transfer_params is not None
        # Only the first allocation triggers a read; a later one (after the load) must not.
        request.kv_transfer_params["do_remote_prefill"] = False
        local = blocks.get_unhashed_block_ids() if num_external_tokens > 0 else []
        self._recv.append(RecvRequest(request.request_id, list(local), remote))
        self.counters.add("recv_requests")

    # ---- prefill side ---------------------------------------------------------------------

    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        """Hold a finished prefill request's blocks for its reader; release an unread one.

        Returns:
            `(hold_blocks, kv_transfer_params for the decode instance)`.
        """
        params = request.kv_transfer_params
        if not params or self._release_unread(request):
            return False, None
        if not self._flag(request, "do_remote_decode") or not self.config.is_producer:
            return False, None
        if request.status not in HANDOFF_STATES or not block_ids:
            return False, None
        self._send[request.request_id] = self.config.send_timeout_s
        self.held[request.request_id] = len(block_ids)
        self.counters.add("handoffs")
        return True, {
            "do_remote_prefill": True,
            "do_remote_decode": False,
            "remote_engine_id": self.config.engine_id,
            "remote_request_id": request.request_id,
            "remote_host": self.config.side_channel_host,
            "remote_port": self.config.side_channel_port,
            "remote_block_ids": list(block_ids),
            "tp_size": self.config.tp_size,
        }

    # ---- both -----------------------------------------------------------------------------

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> MooncakeConnectorMetadata:
        meta = MooncakeConnectorMetadata(recv=self._recv, send=self._send)
        self._recv = []
        self._send = {}
        return meta
