"""Worker side of the Mooncake P/D connector (pull mode: the decode worker reads).

Every worker registers its KV cache with the process-wide Mooncake transfer engine and
describes it as `AgentMetadata`.

Prefill worker: serves the side channel on `kv_port + dp_rank * tp_size + tp_rank`
(`Handshake` -> its `AgentMetadata`; `ReadDone` -> Ack). A request the scheduler hands over
(`MooncakeConnectorMetadata.send`) is reported finished through `get_finished` once every
expected reader sent `ReadDone`, or once its send timeout passes.

Decode worker: for each `RecvRequest`, a transfer thread handshakes with the prefill workers it
needs (cached per address), reads the blocks with one batched Mooncake read per prefill rank,
records the result, and then sends `ReadDone` so the prefill instance frees its blocks. Finished
reads (successful or not) come out of `get_finished`; the blocks of failed ones out of
`get_block_ids_with_load_errors` in the same or an earlier step, so vLLM's
`kv_load_failure_policy` (recompute or fail) applies.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig
from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_layout import KVLayout, describe_kv_caches
from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_params import RecvRequest
from vllm_ascend.distributed.kv_transfer.kv_p2p.messages import (
    Ack,
    AgentMetadata,
    Handshake,
    Message,
    ReadDone,
    Rejected,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.side_channel import (
    SideChannelClient,
    SideChannelError,
    SideChannelServer,
    zmq_address,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.threads import Counters, TransferThreads
from vllm_ascend.distributed.kv_transfer.kv_p2p.tp_mapping import (
    HeadSlice,
    expected_notifications,
    local_kv_heads,
    notified_prefill_ranks,
    plan_decode_rank,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.transfer_plan import plan_transfer
from vllm_ascend.distributed.kv_transfer.utils.mooncake_transfer_engine import (
    MooncakeTransferEngine,
    TransferError,
    get_transfer_engine,
)
from vllm_ascend.logger import init_logger

__all__ = ["MooncakeConnectorWorker", "PeerDirectory", "SendTracker", "make_agent_metadata"]

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


class MooncakeConnectorWorker:
    """One worker's half of the connector.

    Args:
        config: the connector's settings.
        tp_rank: this worker's tensor-parallel rank.
        num_blocks: KV cache blocks (`KVCacheConfig.num_blocks`).
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
        self._pool: TransferThreads | None = None
        self._lock = threading.Lock()
        self._done_recving: set[str] = set()
        self._failed_blocks: set[int] = set()
        self._in_flight = 0
        self.counters = Counters()

    # ---- set-up ---------------------------------------------------------------------------

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        """Describe and register the KV cache; start the side channel and transfer threads.

        Raises:
            ValueError: an unsupported KV cache layout.
            MooncakeNotInstalledError, TransferEngineError: Mooncake is missing or failed.
            SideChannelError: the side-channel port cannot be bound.
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
        side_channel = ""
        if config.is_producer:
            port = config.worker_port(self.tp_rank)
            side_channel = zmq_address(config.side_channel_host, port)
        self.agent = make_agent_metadata(
            config, self.tp_rank, layout, self.engine.session_id, side_channel
        )
        if config.is_producer:
            self.server = SideChannelServer(
                config.side_channel_host,
                config.worker_port(self.tp_rank),
                self.handle_message,
                name=f"mooncake-p2p-side-channel-{self.tp_rank}",
            ).start()
        if config.is_consumer:
            self._pool = TransferThreads(config.num_transfer_threads, "mooncake-p2p-read")
        logger.info(
            "Mooncake P/D worker %d (%s): %d KV regions, %d blocks of %s bytes, session %s",
            self.tp_rank,
            config.kv_role,
            layout.num_regions,
            layout.num_blocks,
            sorted(set(layout.block_lens)),
            self.engine.session_id,
        )

    # ---- prefill side ---------------------------------------------------------------------

    def handle_message(self, message: Message) -> Message | None:
        """Side-channel handler (server thread)."""
        if isinstance(message, Handshake):
            assert self.agent is not None
            return self.agent
        if isinstance(message, ReadDone):
            self.sends.note(message.request_id, message.reader, message.expected, time.monotonic())
            self.counters.add("read_done_received", 1)
            if not message.ok:
                self.counters.add("reader_failures", 1)
            return Ack()
        return Rejected(reason=f"unexpected {type(message).__name__}")

    # ---- decode side ----------------------------------------------------------------------

    def add_sends(self, sends: Mapping[str, float]) -> None:
        """Take over finished prefill requests: request id -> seconds to hold the blocks."""
        now = time.monotonic()
        for request_id, hold_s in sends.items():
            self.sends.add(request_id, hold_s, now)

    def add_recvs(self, recvs: Iterable[RecvRequest]) -> None:
        """Start reading (or releasing) decode requests on the transfer threads."""
        for recv in recvs:
            assert self._pool is not None, "a decode request reached a worker that cannot read"
            with self._lock:
                self._in_flight += 1
            self._pool.submit(self._receive, recv)

    def _receive(self, recv: RecvRequest) -> None:
        started = time.monotonic()
        error: Exception | None = None
        try:
            if recv.local_block_ids:
                self._read(recv)
        except Exception as exc:  # reported as a load failure below, never raised
            error = exc
        elapsed = time.monotonic() - started
        if recv.local_block_ids:
            self._record(recv, error, elapsed)
        try:
            self._notify(recv, ok=error is None)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _record(self, recv: RecvRequest, error: Exception | None, elapsed_s: float) -> None:
        remote = recv.remote
        blocks = len(recv.local_block_ids)
        if error is None:
            self.counters.add("reads_ok", 1)
            self.counters.add("blocks_read", blocks)
            self.counters.add("read_seconds", elapsed_s)
        else:
            self.counters.add("reads_failed", 1)
            self.counters.add("blocks_failed", blocks)
            logger.warning(
                "request %s: reading %d KV blocks from %s:%d (engine %s) failed after %.1f s: %s",
                recv.request_id,
                blocks,
                remote.host,
                remote.port,
                remote.engine_id,
                elapsed_s,
                error,
            )
        with self._lock:
            # Failed blocks first: vLLM reads them no later than the finished request.
            if error is not None:
                self._failed_blocks.update(recv.local_block_ids)
            self._done_recving.add(recv.request_id)

    def _slices_by_rank(self, prefill_tp: int) -> dict[int, list[HeadSlice]]:
        by_rank: dict[int, list[HeadSlice]] = defaultdict(list)
        for piece in plan_decode_rank(
            prefill_tp, self.config.tp_size, self.config.total_kv_heads, self.tp_rank
        ):
            by_rank[piece.prefill_rank].append(piece)
        return by_rank

    def _read(self, recv: RecvRequest) -> None:
        assert self.agent is not None and self.engine is not None
        remote = recv.remote
        needed = len(recv.local_block_ids)
        if len(remote.block_ids) < needed:
            raise ValueError(
                f"the prefill instance offers {len(remote.block_ids)} blocks, {needed} needed"
            )
        # Local prefix-cache hits cover the leading blocks: read only the tail.
        remote_ids = remote.block_ids[len(remote.block_ids) - needed :]
        for prefill_rank, slices in self._slices_by_rank(remote.tp_size).items():
            address = zmq_address(remote.host, remote.port + prefill_rank)
            peer = self.peers.agent(address, remote.engine_id)
            lists = plan_transfer(self.agent, peer, recv.local_block_ids, remote_ids, slices)
            try:
                self.engine.batch_read(peer.session_id, *lists)
            except TransferError:
                self.peers.forget(address)
                raise
            self.counters.add("bytes_read", sum(lists[2]))

    def _notify(self, recv: RecvRequest, ok: bool) -> None:
        remote = recv.remote
        heads = self.config.total_kv_heads
        try:
            ranks = notified_prefill_ranks(remote.tp_size, self.config.tp_size, heads, self.tp_rank)
        except ValueError as exc:
            logger.warning(
                "request %s: cannot notify the prefill instance: %s", recv.request_id, exc
            )
            return
        for prefill_rank in ranks:
            expected = expected_notifications(
                remote.tp_size, self.config.tp_size, heads, prefill_rank
            )
            address = zmq_address(remote.host, remote.port + prefill_rank)
            message = ReadDone(remote.request_id, self.reader_name, expected, ok)
            try:
                self.peers.client(address).call(message)
                self.counters.add("read_done_sent", 1)
            except SideChannelError as exc:
                # The prefill instance frees the blocks at its send timeout instead.
                self.counters.add("read_done_failed", 1)
                logger.warning(
                    "request %s: could not tell %s that its blocks were read: %s",
                    recv.request_id,
                    address,
                    exc,
                )

    # ---- results --------------------------------------------------------------------------

    def get_finished(self) -> tuple[set[str] | None, set[str] | None]:
        """`(finished sends, finished receives)` since the last call."""
        sending: set[str] = set()
        if self.config.is_producer:
            done, expired = self.sends.pop_finished(time.monotonic())
            for request_id in sorted(expired):
                logger.warning(
                    "prefill request %s: no decode instance read its KV blocks within %.0f s; "
                    "freeing them",
                    request_id,
                    self.config.send_timeout_s,
                )
            sending = done | expired
        with self._lock:
            recving, self._done_recving = self._done_recving, set()
        return sending or None, recving or None

    def get_block_ids_with_load_errors(self) -> set[int]:
        with self._lock:
            failed, self._failed_blocks = self._failed_blocks, set()
        return failed

    def stats(self) -> dict[str, float]:
        """Counters of this worker (reads, blocks, bytes, notifications, sends)."""
        return {
            **self.counters.snapshot(),
            "pending_sends": self.sends.pending(),
            "sends_completed": self.sends.completed,
            "sends_expired": self.sends.expired,
            "malformed_dropped": self.server.dropped if self.server else 0,
            "in_flight_reads": self._in_flight,
        }

    def shutdown(self) -> None:
        """Stop serving and reading; deregister the KV cache when no read is in flight."""
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self._pool is not None:
            self._pool.stop()
            self._pool = None
        self.peers.close()
        with self._lock:
            idle = self._in_flight == 0
        if self.engine is not None and self.layout is not None and idle:
            for start, _ in self.layout.allocations:
                self.engine.unregister_memory(start)
        self.layout = None
