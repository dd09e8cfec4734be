"""What the scheduler sides of the two Mooncake P/D connectors share (`P2PSchedulerBase`).

Both the pull (`pull_scheduler.py`) and the layerwise push (`layerwise_scheduler.py`) scheduler:

- read a decode request's `kv_transfer_params` the same way: only on a consumer instance, only
  with `do_remote_prefill`, and an invalid set is counted (`invalid_params`), logged and turned
  into a local prefill (`do_remote_prefill` cleared) rather than failing the request; only the
  parser of the parameters differs (`_parse_remote`);
- hold a finished prefill request's blocks (`held`: request id -> block count) until the
  workers report the request in `finished_sending`;
- report the same `stats()` shape (their counters plus `held_requests`/`held_blocks`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from vllm.v1.request import RequestStatus

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig
from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_params import RemotePrefill, flag
from vllm_ascend.distributed.kv_transfer.kv_p2p.stats import MooncakeP2PStats
from vllm_ascend.distributed.kv_transfer.utils.connector_stats import StatsRecorder
from vllm_ascend.logger import init_logger

if TYPE_CHECKING:
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request


__all__ = ["HANDOFF_STATES", "P2PSchedulerBase"]

logger = init_logger(__name__)

# A prefill request that ends in one of these states hands its KV to a decode instance;
# anything else (abort, error) frees its blocks at once.
HANDOFF_STATES = (RequestStatus.FINISHED_LENGTH_CAPPED, RequestStatus.FINISHED_STOPPED)


class P2PSchedulerBase(ABC):
    """Scheduler-side state both Mooncake P/D connectors keep.

    Args:
        config: the connector's settings.
    """

    #: Prompt tokens a decode request always computes itself (beyond its local prefix hit).
    _tokens_computed_locally: ClassVar[int] = 0
    #: Whether a decode request's load completes outside the forward pass (vLLM's async load).
    _load_async: ClassVar[bool] = True

    def __init__(self, config: MooncakeP2PConfig) -> None:
        self.config = config
        # Prefill requests whose blocks are held for a reader: request id -> block count.
        self.held: dict[str, int] = {}
        self.counters = StatsRecorder(MooncakeP2PStats)

    @abstractmethod
    def _parse_remote(self, params: dict[str, Any]) -> RemotePrefill:
        """The prefill location in a decode request's `kv_transfer_params`.

        Raises:
            ValueError: a missing or malformed parameter.
        """

    def get_num_new_matched_tokens(
        self, request: Request, num_computed_tokens: int
    ) -> tuple[int, bool]:
        """`(prompt tokens the prefill instance provides, loaded asynchronously)`: the prompt
        beyond the local prefix hit, less the last `_tokens_computed_locally` tokens."""
        if self._remote_prefill(request) is None:
            return 0, False
        prompt = len(request.prompt_token_ids or ())
        count = prompt - self._tokens_computed_locally - num_computed_tokens
        self._matched(request, num_computed_tokens)
        return (count, self._load_async) if count > 0 else (0, False)

    def _matched(  # noqa: B027 - an optional hook, a no-op by default
        self, request: Request, num_computed_tokens: int
    ) -> None:
        """Hook: a remote-prefill request's local prefix hit is `num_computed_tokens`."""

    def _flag(self, request: Request, key: str) -> bool:
        """`kv_transfer_params[key]` of `request` as a flag. A value of another type is logged
        once (naming the field) and then reads as false: the request runs as a local one."""
        params = request.kv_transfer_params
        if not params:
            return False
        try:
            return flag(params, key)
        except ValueError as exc:
            self.counters.add("invalid_params")
            logger.warning("request %s: %s; running it as a local request", request.request_id, exc)
            params[key] = False
            return False

    def _remote_prefill(self, request: Request) -> RemotePrefill | None:
        # None: not a remote-prefill request on this instance, or its parameters are invalid.
        params = request.kv_transfer_params
        if not params or not self._flag(request, "do_remote_prefill"):
            return None
        if not self.config.is_consumer:
            return None
        try:
            return self._parse_remote(params)
        except ValueError as exc:
            self.counters.add("invalid_params")
            logger.warning(
                "request %s: ignoring invalid kv_transfer_params (%s); computing its prompt "
                "locally",
                request.request_id,
                exc,
            )
            params["do_remote_prefill"] = False
            return None

    @abstractmethod
    def _queue_release(self, request_id: str, remote: RemotePrefill) -> None:
        """Tell the worker to let the prefill instance free `remote`'s blocks unread."""

    def _release_unread(self, request: Request) -> bool:
        """Release the prefill copy of a decode request that ends before its blocks were
        allocated (now rather than at the prefill side's send timeout).

        Returns:
            Whether `request` was a remote-prefill request (then nothing else is to be done).
        """
        params = request.kv_transfer_params
        if not params or not self._flag(request, "do_remote_prefill"):
            return False
        remote = self._remote_prefill(request)
        params["do_remote_prefill"] = False
        if remote is not None:
            self._queue_release(request.request_id, remote)
            self.counters.add("released_unread")
        return True

    def update_connector_output(self, connector_output: KVConnectorOutput) -> None:
        for request_id in connector_output.finished_sending or ():
            self.held.pop(request_id, None)

    def take_stats(self) -> MooncakeP2PStats | None:
        """The scheduler side's counter increases since the last call (vLLM's metrics)."""
        return self.counters.take()

    def stats(self) -> dict[str, float]:
        """Counter totals, plus `held_requests`/`held_blocks` (prefill blocks awaiting a
        reader); for tests and diagnostics."""
        return {
            **self.counters.snapshot(),
            "held_requests": len(self.held),
            "held_blocks": sum(self.held.values()),
        }

    def shutdown(self) -> None:  # noqa: B027 - a no-op on purpose, not a hook to override
        """Nothing to release: the scheduler side owns no thread, socket or memory."""
