"""Scheduler side of the layerwise Mooncake connector (push mode: the prefill side writes).

The proxy sends the request to both instances at once, with a shared `transfer_id`.

Decode instance: a request with `do_remote_prefill` reports its prompt beyond the local
prefix-cache hit, except the last token, as externally computed and loaded *asynchronously*:
vLLM keeps it out of the batch (`WAITING_FOR_REMOTE_KVS`) until the worker reports every layer
written, so a prefill instance that pushes late delays that request alone, never the running
decodes. `update_state_after_alloc` queues a `LoadSpec` (the blocks to fill); the worker
registers them with the prefill workers (`PushRequest`).

Prefill instance: while a request with `do_remote_decode` and a `transfer_id` computes its
prompt, every step queues a `SaveSpec` (its blocks, the token blocks written this step, whether
the prompt completes); the worker pushes each layer as soon as it is computed. A finished
request keeps its blocks until the pushes are done (or `send_timeout_s` passes).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig
from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_params import (
    RemotePrefill,
    parse_layerwise_prefill,
    transfer_id_of,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_metadata import (
    LayerwiseMetadata,
    LoadSpec,
    SaveSpec,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.scheduler_base import (
    HANDOFF_STATES,
    P2PSchedulerBase,
)
from vllm_ascend.logger import init_logger

if TYPE_CHECKING:
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks, KVCacheManager
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.request import Request

__all__ = ["MooncakeLayerwiseScheduler"]

logger = init_logger(__name__)


class MooncakeLayerwiseScheduler(P2PSchedulerBase):
    """Scheduler-side state of the layerwise connector.

    Args:
        config: the connector's settings.
    """

    # The decode side computes the prompt's last token itself (it samples the first output).
    _tokens_computed_locally = 1
    # Asynchronous: a late push must not hold the forward pass of every running request.
    _load_async = True

    def __init__(self, config: MooncakeP2PConfig) -> None:
        super().__init__(config)
        self.block_size = config.block_size
        self.kv_cache_manager: KVCacheManager | None = None
        self._loads: list[LoadSpec] = []
        self._releases: list[LoadSpec] = []
        self._sends: dict[str, float] = {}
        # Transfers this instance will not push: transfer id -> reason (sent to the worker).
        self._withheld: dict[str, str] = {}
        # Prefill requests that push their KV: request id -> (request, transfer id), and those
        # whose first step was planned (that step also pushes the prefix-cache hit).
        self._pushing: dict[str, tuple[Request, str]] = {}
        self._push_started: set[str] = set()
        # Decode requests: the block-aligned local prefix hit the load starts after.
        self._local_hit: dict[str, int] = {}

    # ---- decode side ----------------------------------------------------------------------

    def _parse_remote(self, params: dict[str, Any]) -> RemotePrefill:
        return parse_layerwise_prefill(params)

    def _matched(self, request: Request, num_computed_tokens: int) -> None:
        self._local_hit[request.request_id] = num_computed_tokens

    def _queue_release(self, request_id: str, remote: RemotePrefill) -> None:
        self._releases.append(LoadSpec(request_id, remote.request_id, remote, [], 0))

    def update_state_after_alloc(
        self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int
    ) -> None:
        params = request.kv_transfer_params
        raw = params.get("do_remote_decode") if params else None
        if params and self._flag(request, "do_remote_decode"):
            self._track_push(request)
            return
        if params and raw is not None and not isinstance(raw, bool):
            # Dropped from the push (a malformed flag): its decode side must not wait for it.
            self._withhold(params, "the prefill request's do_remote_decode is not a bool")
        remote = self._remote_prefill(request)
        if remote is None:
            return
        assert params is not None
        params["do_remote_prefill"] = False
        start = self._local_hit.pop(request.request_id, 0)
        if num_external_tokens <= 0:
            self._queue_release(request.request_id, remote)
            self.counters.add("released_unread")
            return
        first = start // self.block_size
        last = math.ceil((start + num_external_tokens) / self.block_size)
        block_ids = blocks.get_block_ids()[0][first:last]
        self._loads.append(
            LoadSpec(request.request_id, remote.request_id, remote, list(block_ids), first)
        )
        self.counters.add("loads")

    # ---- prefill side ---------------------------------------------------------------------

    def _track_push(self, request: Request) -> None:
        params = request.kv_transfer_params
        assert params is not None
        if not self.config.is_producer:
            self._withhold(params, f"the instance it reached is a {self.config.kv_role}")
            return
        try:
            transfer_id = transfer_id_of(params)
        except ValueError as exc:
            # Without a transfer id there is no decode side to tell.
            self.counters.add("invalid_params")
            logger.warning("request %s: not pushing its KV: %s", request.request_id, exc)
            return
        self._pushing[request.request_id] = (request, transfer_id)

    def _withhold(self, params: dict[str, Any], reason: str) -> None:
        # A decode request registered under this transfer id gives up at once (`Withheld`).
        transfer_id = params.get("transfer_id")
        if isinstance(transfer_id, str) and transfer_id:
            self._withheld[transfer_id] = reason

    def _save_specs(self, scheduler_output: SchedulerOutput) -> list[SaveSpec]:
        if not self._pushing:
            return []
        assert self.kv_cache_manager is not None, "bind_kv_cache_manager was not called"
        saves: list[SaveSpec] = []
        for request_id, scheduled in scheduler_output.num_scheduled_tokens.items():
            entry = self._pushing.get(request_id)
            if entry is None:
                continue
            request, transfer_id = entry
            # build_connector_meta runs before the scheduler advances num_computed_tokens.
            computed = request.num_computed_tokens
            end = min(computed + scheduled, request.num_prompt_tokens)
            if computed >= request.num_prompt_tokens:
                continue
            # The first step also pushes the blocks this instance had cached: the decode side
            # may not have them.
            start = computed if request_id in self._push_started else 0
            self._push_started.add(request_id)
            block_ids = self.kv_cache_manager.get_block_ids(request_id)[0]
            saves.append(
                SaveSpec(
                    request_id=request_id,
                    transfer_id=transfer_id,
                    block_ids=list(block_ids),
                    start_block=start // self.block_size,
                    end_block=math.ceil(end / self.block_size),
                    final=end >= request.num_prompt_tokens,
                )
            )
        return saves

    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        """Hold a pushing prefill request's blocks; release an unregistered decode request."""
        params = request.kv_transfer_params
        pushing = self._pushing.pop(request.request_id, None)
        self._push_started.discard(request.request_id)
        self._local_hit.pop(request.request_id, None)
        if not params or self._release_unread(request):
            return False, None
        if pushing is None:
            return False, None
        if request.status not in HANDOFF_STATES or not block_ids:
            self._withhold(params, f"the prefill request ended as {request.status.name}")
            return False, None
        self._sends[request.request_id] = self.config.send_timeout_s
        self.held[request.request_id] = len(block_ids)
        self.counters.add("handoffs")
        return True, None

    # ---- both -----------------------------------------------------------------------------

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> LayerwiseMetadata:
        meta = LayerwiseMetadata(
            loads=self._loads,
            releases=self._releases,
            saves=self._save_specs(scheduler_output),
            sends=self._sends,
        )
        meta.withheld, self._withheld = self._withheld, {}
        self._loads, self._releases, self._sends = [], [], {}
        return meta
