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
reads (successful or not) come out of `get_finished` (which, on a step that ran no forward
pass, waits briefly for a read in flight: see `IDLE_STEP_WAIT_S`); the blocks of failed ones out of
`get_block_ids_with_load_errors` in the same or an earlier step, so vLLM's
`kv_load_failure_policy` (recompute or fail) applies.

What this worker shares with the layerwise one (KV registration, the side channel's
handshake, peers, held sends, load-error reporting) lives in `worker_base.py`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig
from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_layout import KVLayout
from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_params import RecvRequest
from vllm_ascend.distributed.kv_transfer.kv_p2p.messages import Ack, Message, ReadDone
from vllm_ascend.distributed.kv_transfer.kv_p2p.side_channel import (
    SideChannelError,
    zmq_address,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.transfer_plan import plan_transfer
from vllm_ascend.distributed.kv_transfer.kv_p2p.worker_base import P2PWorkerBase
from vllm_ascend.distributed.kv_transfer.utils.mooncake_transfer_engine import TransferError
from vllm_ascend.logger import init_logger

__all__ = ["MooncakeConnectorWorker"]

logger = init_logger(__name__)

# How long `get_finished` waits for a read in flight on a step that ran no forward pass. While
# a decode request waits for its KV, the engine's loop runs empty steps back to back holding
# the GIL, and the transfer thread gets it only at each switch interval (5 ms), once to start
# the read and once to finish it. Waiting on a condition releases the GIL at once and ends when
# the read finishes; the bound (one switch interval) caps how late a request arriving
# meanwhile is admitted. Steps with a forward pass never wait.
IDLE_STEP_WAIT_S = 0.005


class MooncakeConnectorWorker(P2PWorkerBase):
    """One worker's half of the connector (shared state and steps: `worker_base.py`).

    Args:
        config: the connector's settings.
        tp_rank: this worker's tensor-parallel rank.
        num_blocks: KV cache blocks (`KVCacheConfig.num_blocks`).
    """

    def __init__(self, config: MooncakeP2PConfig, tp_rank: int, num_blocks: int) -> None:
        super().__init__(config, tp_rank, num_blocks)
        self._lock = threading.Lock()
        self._recv_done = threading.Condition(self._lock)  # a read finished
        self._done_recving: set[str] = set()
        self._in_flight = 0
        self._idle_step = False

    service_name = "mooncake-p2p"

    # ---- set-up ---------------------------------------------------------------------------

    def _serves_side_channel(self) -> bool:
        return self.config.is_producer

    def _runs_transfer_threads(self) -> bool:
        return self.config.is_consumer

    def _registered(self, layout: KVLayout) -> None:
        assert self.engine is not None
        logger.info(
            "Mooncake P/D worker %d (%s): %d KV regions, %d blocks of %s bytes, session %s",
            self.tp_rank,
            self.config.kv_role,
            layout.num_regions,
            layout.num_blocks,
            sorted(set(layout.block_lens)),
            self.engine.session_id,
        )

    # ---- prefill side ---------------------------------------------------------------------

    def _handle(self, message: Message) -> Message | None:
        if isinstance(message, ReadDone):
            self.sends.note(message.request_id, message.reader, message.expected, time.monotonic())
            self.counters.add("read_done_received", 1)
            if not message.ok:
                self.counters.add("reader_failures", 1)
            return Ack()
        return None

    # ---- decode side ----------------------------------------------------------------------

    def add_sends(self, sends: Mapping[str, float]) -> None:
        """Take over finished prefill requests: request id -> seconds to hold the blocks."""
        now = time.monotonic()
        for request_id, hold_s in sends.items():
            self.sends.add(request_id, hold_s, now)

    def note_step(self, ran_forward: bool) -> None:
        """Tell the worker whether this step ran a forward pass (`get_finished` may wait
        briefly for reads in flight only on a step that did not)."""
        self._idle_step = not ran_forward

    def add_recvs(self, recvs: Iterable[RecvRequest]) -> None:
        """Start reading (or releasing) decode requests on the transfer threads."""
        for recv in recvs:
            assert self._threads is not None, "a decode request reached a worker that cannot read"
            with self._lock:
                self._in_flight += 1
            if not self._threads.submit(self._receive, recv):
                # The queue is full (TransferThreads logged it): a failed read, at once. The
                # prefill instance frees the blocks at its send timeout.
                with self._lock:
                    self._in_flight -= 1
                if recv.local_block_ids:
                    self.counters.add("reads_failed", 1)
                    self.counters.add("blocks_failed", len(recv.local_block_ids))
                    self._record_load_errors(recv.local_block_ids)
                with self._lock:
                    self._done_recving.add(recv.request_id)
                    self._recv_done.notify_all()

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
                self._recv_done.notify_all()

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
        # Failed blocks first: vLLM reads them no later than the finished request.
        if error is not None:
            self._record_load_errors(recv.local_block_ids)
        with self._lock:
            self._done_recving.add(recv.request_id)
            self._recv_done.notify_all()

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
        for prefill_rank, slices in self._slices_by_prefill_rank(remote.tp_size).items():
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
        for _, expected, address in self._prefill_peers(remote, recv.request_id):
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
            sending = self._pop_finished_sends(
                "prefill request %s: no decode instance read its KV blocks within %.0f s; "
                "freeing them"
            )
        with self._lock:
            if self._idle_step and self._in_flight and not self._done_recving:
                self._recv_done.wait(IDLE_STEP_WAIT_S)
            self._idle_step = False
            recving, self._done_recving = self._done_recving, set()
        return sending or None, recving or None

    def stats(self) -> dict[str, float]:
        """Counters of this worker (reads, blocks, bytes, notifications, sends), reads in
        flight (queued or running) and reads queued."""
        queued = self._threads.queued if self._threads is not None else 0
        return {**self._send_stats(), "in_flight_reads": self._in_flight, "queued_reads": queued}

    def shutdown(self) -> None:
        """Stop serving and reading; deregister the KV cache when no read is in flight."""
        self._stop_serving()
        with self._lock:
            idle = self._in_flight == 0
        if idle:
            self._release_memory()
        self.layout = None
