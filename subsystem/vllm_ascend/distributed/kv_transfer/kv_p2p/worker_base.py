"""What the worker sides of the two Mooncake P/D connectors share.

Both the pull (`pull_worker.py`) and the layerwise push (`layerwise_worker.py`) worker:

- describe their KV cache (`KVLayout`), check that a prefill/decode TP pairing it cannot serve
  is refused, and register it with the process-wide Mooncake transfer engine
  (`P2PWorkerBase._register_layout`);
- describe themselves to peers as `AgentMetadata` served on the side channel
  (`P2PWorkerBase.register_kv_caches`, `handle_message`), and cache their peers' clients and
  metadata (`peers.py`);
- on the prefill side, hold a finished request's blocks until every expected reader confirmed
  or its send timeout passed (`send_tracker.SendTracker`, `P2PWorkerBase._pop_finished_sends`);
- on the decode side, report the blocks of failed loads once
  (`get_block_ids_with_load_errors`);
- on the decode side, read from (or are pushed to by) the prefill ranks that `tp_mapping`
  assigns to them, and tell those ranks about each request (`_slices_by_prefill_rank`,
  `_prefill_peers`);
- report the same send counters and stop the same way (`_send_stats`, `_stop_serving`).
"""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict
from typing import Any, ClassVar

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig
from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_layout import KVLayout, describe_kv_caches
from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_params import RemotePrefill
from vllm_ascend.distributed.kv_transfer.kv_p2p.messages import (
    AgentMetadata,
    Handshake,
    Message,
    Rejected,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.peers import PeerDirectory, make_agent_metadata
from vllm_ascend.distributed.kv_transfer.kv_p2p.send_tracker import SendTracker
from vllm_ascend.distributed.kv_transfer.kv_p2p.side_channel import (
    SideChannelServer,
    zmq_address,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.stats import MooncakeP2PStats
from vllm_ascend.distributed.kv_transfer.kv_p2p.threads import TransferThreads
from vllm_ascend.distributed.kv_transfer.kv_p2p.tp_mapping import (
    HeadSlice,
    expected_notifications,
    local_kv_heads,
    notified_prefill_ranks,
    plan_decode_rank,
)
from vllm_ascend.distributed.kv_transfer.utils.connector_stats import StatsRecorder
from vllm_ascend.distributed.kv_transfer.utils.mooncake_transfer_engine import (
    MooncakeTransferEngine,
    get_transfer_engine,
)
from vllm_ascend.logger import init_logger

__all__ = ["P2PWorkerBase"]

logger = init_logger(__name__)


class P2PWorkerBase:
    """The state and steps both Mooncake P/D workers share.

    Args:
        config: the connector's settings.
        tp_rank: this worker's tensor-parallel rank.
        num_blocks: KV cache blocks (`KVCacheConfig.num_blocks`).

    Attributes set by `register_kv_caches`: `layout`, `engine`, `agent`, and, when the
    subclass's role runs them, `server` (the side-channel server) and `_threads` (its
    transfer threads).
    """

    #: Prefix of the side-channel server's and the transfer threads' names.
    service_name: ClassVar[str] = "mooncake-p2p"

    def __init__(self, config: MooncakeP2PConfig, tp_rank: int, num_blocks: int) -> None:
        self.config = config
        self.tp_rank = tp_rank
        self.num_blocks = num_blocks
        self.reader_name = f"{config.engine_id}:{tp_rank}"
        self.layout: KVLayout | None = None
        self.agent: AgentMetadata | None = None
        self.engine: MooncakeTransferEngine | None = None
        self.server: SideChannelServer | None = None
        self.peers = PeerDirectory(config.engine_id, tp_rank, config.handshake_timeout_s)
        self.sends = SendTracker(orphan_ttl_s=config.send_timeout_s)
        self._threads: TransferThreads | None = None
        self.counters = StatsRecorder(MooncakeP2PStats)
        self._failed_lock = threading.Lock()
        self._failed_blocks: set[int] = set()

    # ---- set-up ---------------------------------------------------------------------------

    def _serves_side_channel(self) -> bool:
        """Whether this worker answers peers (default: every role)."""
        return True

    def _runs_transfer_threads(self) -> bool:
        """Whether this worker moves KV on its own threads (default: every role)."""
        return True

    def _registered(self, layout: KVLayout) -> None:
        """Hook: the KV cache is registered and the services run (default: nothing)."""

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        """Describe and register the KV cache; start the side channel and transfer threads.

        Raises:
            ValueError: an unsupported KV cache layout.
            MooncakeNotInstalledError, TransferEngineError: Mooncake is missing or failed.
            SideChannelError: the side-channel port cannot be bound.
        """
        config = self.config
        layout = self._register_layout(kv_caches)
        assert self.engine is not None
        port = config.worker_port(self.tp_rank)
        serves = self._serves_side_channel()
        address = zmq_address(config.side_channel_host, port) if serves else ""
        self.agent = make_agent_metadata(
            config, self.tp_rank, layout, self.engine.session_id, address
        )
        if serves:
            self.server = SideChannelServer(
                config.side_channel_host,
                port,
                self.handle_message,
                name=f"{self.service_name}-side-channel-{self.tp_rank}",
            ).start()
        if self._runs_transfer_threads():
            self._threads = TransferThreads(
                config.num_transfer_threads, self.service_name, config.transfer_queue_size
            )
        self._registered(layout)

    def handle_message(self, message: Message) -> Message | None:
        """Side-channel handler (server thread): a `Handshake` gets this worker's
        `AgentMetadata`, anything `_handle` does not take a `Rejected`."""
        if isinstance(message, Handshake):
            assert self.agent is not None
            return self.agent
        reply = self._handle(message)
        if reply is None:
            return Rejected(reason=f"unexpected {type(message).__name__}")
        return reply

    def _handle(self, message: Message) -> Message | None:
        """The reply to a message of the subclass's protocol; None: not one this role takes."""
        return None

    def _register_layout(self, kv_caches: dict[str, Any]) -> KVLayout:
        """Describe the KV cache and register its memory with the transfer engine.

        Sets `self.engine` and `self.layout`.

        Raises:
            ValueError: an unsupported KV cache layout, or prefill and decode TP sizes that
                differ on a layout whose blocks do not store their heads one after the other.
            MooncakeNotInstalledError, TransferEngineError: Mooncake is missing or failed.
        """
        config = self.config
        heads = local_kv_heads(config.total_kv_heads, config.tp_size)
        layout = describe_kv_caches(kv_caches, self.num_blocks, heads)
        if config.prefill.tp_size != config.decode.tp_size and not layout.head_major:
            raise ValueError(
                f"prefill tp_size={config.prefill.tp_size} and decode "
                f"tp_size={config.decode.tp_size} differ, which needs KV blocks that store "
                "their heads one after the other; this KV cache layout does not"
            )
        self.engine = get_transfer_engine(
            config.engine_hostname,
            config.protocol,
            config.device_name,
            config.metadata_server,
            tcp_timeout_s=math.ceil(config.transfer_timeout_s),
        )
        for start, length in layout.allocations:
            self.engine.register_memory(start, length)
        self.layout = layout
        return layout

    def _slices_by_prefill_rank(self, prefill_tp: int) -> dict[int, list[HeadSlice]]:
        """The head slices this decode worker takes, grouped by the prefill rank holding them."""
        by_rank: dict[int, list[HeadSlice]] = defaultdict(list)
        for piece in plan_decode_rank(
            prefill_tp, self.config.tp_size, self.config.total_kv_heads, self.tp_rank
        ):
            by_rank[piece.prefill_rank].append(piece)
        return by_rank

    def _prefill_peers(self, remote: RemotePrefill, request_id: str) -> list[tuple[int, int, str]]:
        """The prefill workers this decode worker tells about `remote`'s request.

        Returns:
            `(prefill rank, readers that rank expects, its side-channel address)` per worker;
            empty (and logged) when the two TP sizes cannot be paired.
        """
        prefill_tp, heads = remote.tp_size, self.config.total_kv_heads
        try:
            ranks = notified_prefill_ranks(prefill_tp, self.config.tp_size, heads, self.tp_rank)
        except ValueError as exc:
            logger.warning("request %s: cannot reach the prefill instance: %s", request_id, exc)
            return []
        return [
            (
                rank,
                expected_notifications(prefill_tp, self.config.tp_size, heads, rank),
                zmq_address(remote.host, remote.port + rank),
            )
            for rank in ranks
        ]

    def _pop_finished_sends(self, expired_warning: str) -> set[str]:
        """Prefill requests whose blocks can be freed: confirmed by every reader, or expired.

        Args:
            expired_warning: logged with the request id (`%s`; "ID (and N more since the last
                such line)" when several expired) and `send_timeout_s` (`%.0f`, seconds), at
                most once per `EXPIRY_LOG_INTERVAL_S`: a decode instance that went away expires
                every request it had, and that is one event, not one per request.
        """
        now = time.monotonic()
        done, expired = self.sends.pop_finished(now)
        named = self.sends.expiries_to_log(expired, now)
        if named:
            more = f" (and {len(named) - 1} more since the last such line)" if named[1:] else ""
            logger.warning(expired_warning, named[0] + more, self.config.send_timeout_s)
        return done | expired

    def _record_load_errors(self, block_ids: list[int]) -> None:
        with self._failed_lock:
            self._failed_blocks.update(block_ids)

    def get_block_ids_with_load_errors(self) -> set[int]:
        """Blocks of loads that failed since the last call (vLLM's `kv_load_failure_policy`
        then recomputes or fails their requests)."""
        with self._failed_lock:
            failed, self._failed_blocks = self._failed_blocks, set()
        return failed

    def take_stats(self) -> MooncakeP2PStats | None:
        """This worker's counter increases since the last call (vLLM's metrics)."""
        return self.counters.take()

    def _send_stats(self) -> dict[str, float]:
        """Counters of this worker, plus the prefill-side send and side-channel counts."""
        return {
            **self.counters.snapshot(),
            "pending_sends": self.sends.pending(),
            "sends_completed": self.sends.completed,
            "sends_expired": self.sends.expired,
            "malformed_dropped": self.server.dropped if self.server else 0,
        }

    def _stop_serving(self) -> None:
        """Stop the side-channel server and the transfer threads; close the peer clients."""
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self._threads is not None:
            self._threads.stop()
            self._threads = None
        self.peers.close()

    def _release_memory(self) -> None:
        """Deregister the KV cache from the process-wide transfer engine (at shutdown, once no
        transfer can still move bytes in or out of it): the engine outlives this worker, and
        a cache allocated later at an address inside a stale region could not register."""
        if self.engine is not None and self.layout is not None:
            for start, _ in self.layout.allocations:
                self.engine.unregister_memory(start)
        self.layout = None
