"""What the worker sides of the two Mooncake P/D connectors share.

Both the pull (`worker.py`) and the layerwise push (`layerwise_worker.py`) worker:

- describe their KV cache (`KVLayout`), check that a prefill/decode TP pairing it cannot serve
  is refused, and register it with the process-wide Mooncake transfer engine
  (`P2PWorkerBase._register_layout`);
- describe themselves to peers as `AgentMetadata` (`make_agent_metadata`) served on the side
  channel, and cache their peers' clients and metadata (`PeerDirectory`);
- on the prefill side, hold a finished request's blocks until every expected reader confirmed
  or its send timeout passed (`SendTracker`, `P2PWorkerBase._pop_finished_sends`);
- on the decode side, read from (or are pushed to by) the prefill ranks that `tp_mapping`
  assigns to them (`P2PWorkerBase._slices_by_prefill_rank`);
- report the same send counters and stop the same way (`_send_stats`, `_stop_serving`).
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import defaultdict
from typing import Any

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig
from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_layout import KVLayout, describe_kv_caches
from vllm_ascend.distributed.kv_transfer.kv_p2p.messages import AgentMetadata, Handshake
from vllm_ascend.distributed.kv_transfer.kv_p2p.side_channel import (
    SideChannelClient,
    SideChannelError,
    SideChannelServer,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.stats import MooncakeP2PStats
from vllm_ascend.distributed.kv_transfer.kv_p2p.threads import TransferThreads
from vllm_ascend.distributed.kv_transfer.kv_p2p.tp_mapping import (
    HeadSlice,
    local_kv_heads,
    plan_decode_rank,
)
from vllm_ascend.distributed.kv_transfer.utils.connector_stats import StatsRecorder
from vllm_ascend.distributed.kv_transfer.utils.mooncake_transfer_engine import (
    MooncakeTransferEngine,
    get_transfer_engine,
)
from vllm_ascend.logger import init_logger

__all__ = ["P2PWorkerBase", "PeerDirectory", "SendTracker", "make_agent_metadata"]

logger = init_logger(__name__)


def make_agent_metadata(
    config: MooncakeP2PConfig,
    tp_rank: int,
    layout: KVLayout,
    session_id: str,
    side_channel: str,
) -> AgentMetadata:
    """This worker's `AgentMetadata` (see `messages.AgentMetadata`)."""
    return AgentMetadata(
        engine_id=config.engine_id,
        agent_id=uuid.uuid4().hex,
        tp_rank=tp_rank,
        tp_size=config.tp_size,
        session_id=session_id,
        region_bases=list(layout.bases),
        block_strides=list(layout.block_strides),
        block_lens=list(layout.block_lens),
        num_blocks=layout.num_blocks,
        block_size=config.block_size,
        kv_heads=layout.kv_heads,
        head_major=layout.head_major,
        layer_of_region=list(layout.layer_of_region),
        side_channel=side_channel,
    )


class SendTracker:
    """Prefill requests whose blocks wait for their readers (thread-safe).

    `ReadDone` may arrive before the scheduler's hand-over reaches this worker (the decode
    side can be that fast); such notes are kept and matched later, and dropped after
    `orphan_ttl_s` if the hand-over never comes.
    """

    def __init__(self, orphan_ttl_s: float) -> None:
        self._lock = threading.Lock()
        self._deadlines: dict[str, float] = {}
        self._readers: dict[str, set[str]] = defaultdict(set)
        self._expected: dict[str, int] = {}
        self._noted_at: dict[str, float] = {}
        self._orphan_ttl_s = orphan_ttl_s
        self.completed = 0
        self.expired = 0

    def add(self, request_id: str, hold_s: float, now: float) -> None:
        with self._lock:
            self._deadlines[request_id] = now + hold_s

    def note(self, request_id: str, reader: str, expected: int, now: float) -> None:
        with self._lock:
            self._readers[request_id].add(reader)
            self._expected[request_id] = max(1, expected)
            self._noted_at.setdefault(request_id, now)

    def pending(self) -> int:
        with self._lock:
            return len(self._deadlines)

    def pop_finished(self, now: float) -> tuple[set[str], set[str]]:
        """`(read by all their readers, expired)` request ids, forgotten from here on."""
        done: set[str] = set()
        expired: set[str] = set()
        with self._lock:
            for request_id, deadline in list(self._deadlines.items()):
                expected = self._expected.get(request_id)
                if expected is not None and len(self._readers[request_id]) >= expected:
                    done.add(request_id)
                elif now >= deadline:
                    expired.add(request_id)
            for request_id in done | expired:
                del self._deadlines[request_id]
                self._forget(request_id)
            for request_id, noted in list(self._noted_at.items()):
                if request_id not in self._deadlines and now - noted > self._orphan_ttl_s:
                    self._forget(request_id)
            self.completed += len(done)
            self.expired += len(expired)
        return done, expired

    def _forget(self, request_id: str) -> None:
        self._readers.pop(request_id, None)
        self._expected.pop(request_id, None)
        self._noted_at.pop(request_id, None)


class PeerDirectory:
    """Side-channel clients and handshaken `AgentMetadata` of remote workers, per address."""

    def __init__(self, engine_id: str, tp_rank: int, timeout_s: float) -> None:
        self._engine_id = engine_id
        self._tp_rank = tp_rank
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._clients: dict[str, SideChannelClient] = {}
        self._agents: dict[str, AgentMetadata] = {}

    def client(self, address: str) -> SideChannelClient:
        with self._lock:
            client = self._clients.get(address)
            if client is None:
                client = self._clients[address] = SideChannelClient(address, self._timeout_s)
            return client

    def agent(self, address: str, engine_id: str) -> AgentMetadata:
        """The `AgentMetadata` served at `address`, fetched once.

        Raises:
            SideChannelError: no or an invalid answer, or the worker there belongs to another
                engine than `engine_id` (not checked when `engine_id` is empty).
        """
        with self._lock:
            cached = self._agents.get(address)
        if cached is not None:
            return cached
        reply = self.client(address).call(Handshake(self._engine_id, self._tp_rank))
        if not isinstance(reply, AgentMetadata):
            raise SideChannelError(f"{address} answered a handshake with {type(reply).__name__}")
        if engine_id and reply.engine_id != engine_id:
            raise SideChannelError(
                f"{address} serves engine {reply.engine_id!r}, not {engine_id!r}"
            )
        with self._lock:
            self._agents[address] = reply
        return reply

    def forget(self, address: str) -> None:
        """Drop the cached metadata (the peer may have restarted)."""
        with self._lock:
            self._agents.pop(address, None)

    def close(self) -> None:
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
            self._agents.clear()
        for client in clients:
            client.close()


class P2PWorkerBase:
    """The state and steps both Mooncake P/D workers share.

    Args:
        config: the connector's settings.
        tp_rank: this worker's tensor-parallel rank.
        num_blocks: KV cache blocks (`KVCacheConfig.num_blocks`).

    Attributes set by `_register_layout`: `layout`, `engine`; by the subclass: `agent`,
    `server` (the side-channel server) and `_threads` (its transfer threads), when it has them.
    """

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

    def _pop_finished_sends(self, expired_warning: str) -> set[str]:
        """Prefill requests whose blocks can be freed: confirmed by every reader, or expired.

        Args:
            expired_warning: logged once per expired request, with the request id (`%s`) and
                `send_timeout_s` (`%.0f`, seconds).
        """
        done, expired = self.sends.pop_finished(time.monotonic())
        for request_id in sorted(expired):
            logger.warning(expired_warning, request_id, self.config.send_timeout_s)
        return done | expired

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
