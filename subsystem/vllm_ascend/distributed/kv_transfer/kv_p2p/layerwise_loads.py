"""Decode side of the layerwise Mooncake worker: registering loads and collecting layers.

For each `LoadSpec` of the step, a transfer thread sends a `PushRequest` (this worker's
`AgentMetadata`, its blocks, the head slices it takes) to every prefill worker it reads from,
and a release-only one to the prefill workers it is assigned to but does not read.

Loads are asynchronous (vLLM's `WAITING_FOR_REMOTE_KVS`): the request stays out of the batch
while the prefill side pushes, so a late or slow prefill instance delays only its own request,
never the other running decodes (a synchronous load made the forward pass of the whole batch
wait, layer by layer, up to `layer_wait_timeout_s`). `get_finished` reports a load as
received once every expected prefill worker reported every layer written (`LayerDone`), or as
received with its blocks in `get_block_ids_with_load_errors` (`kv_load_failure_policy`
applies) once a prefill worker said it will not push (`Withheld`), a registration or push
failed, or `layer_wait_timeout_s` since its registration passed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_metadata import LoadSpec
from vllm_ascend.distributed.kv_transfer.kv_p2p.messages import LayerDone, PushRequest, Withheld
from vllm_ascend.distributed.kv_transfer.kv_p2p.side_channel import SideChannelError
from vllm_ascend.distributed.kv_transfer.kv_p2p.worker_base import P2PWorkerBase
from vllm_ascend.logger import init_logger

__all__ = ["LayerwiseLoads"]

logger = init_logger(__name__)


@dataclass
class _Load:
    """A decode request receiving pushes this step."""

    spec: LoadSpec
    senders: int  # prefill workers that push to this worker
    num_layers: int
    deadline: float
    arrived: list[set[int]] = field(default_factory=list)
    failed: str = ""

    def complete(self) -> bool:
        return all(len(senders) >= self.senders for senders in self.arrived)


class LayerwiseLoads(P2PWorkerBase):
    """The decode half of `MooncakeLayerwiseWorker` (its own lock and state)."""

    def __init__(self, config: MooncakeP2PConfig, tp_rank: int, num_blocks: int) -> None:
        super().__init__(config, tp_rank, num_blocks)
        self._load_cond = threading.Condition()
        self._loads: dict[str, _Load] = {}  # transfer id -> load not yet reported finished

    def start_loads(self, loads: list[LoadSpec], releases: list[LoadSpec]) -> None:
        """Register this step's loads with their prefill workers (on transfer threads)."""
        assert self._threads is not None and self.layout is not None
        deadline = time.monotonic() + self.config.layer_wait_timeout_s
        num_layers = len(self.layout.layer_names)
        with self._load_cond:
            for spec in loads:
                try:
                    senders = len(self._slices_by_prefill_rank(spec.remote.tp_size))
                except ValueError as exc:
                    senders = 0
                    failure = str(exc)
                else:
                    failure = ""
                load = _Load(
                    spec, senders, num_layers, deadline, [set() for _ in range(num_layers)]
                )
                load.failed = failure
                self._loads[spec.transfer_id] = load
        for spec in loads:
            if not self._threads.submit(self._send_push_requests, spec):
                self._fail_load(spec.transfer_id, "the transfer queue is full")
        for spec in releases:
            # Refused (queue full): the prefill side frees the blocks at its send timeout.
            self._threads.submit(self._send_push_requests, spec)

    def _send_push_requests(self, spec: LoadSpec) -> None:
        assert self.agent is not None
        peers = self._prefill_peers(spec.remote, spec.request_id)
        senders = self._slices_by_prefill_rank(spec.remote.tp_size) if peers else {}
        for prefill_rank, expected, address in peers:
            slices = senders.get(prefill_rank, []) if spec.block_ids else []
            message = PushRequest(
                transfer_id=spec.transfer_id,
                reader=self.reader_name,
                agent=self.agent,
                block_ids=list(spec.block_ids) if slices else [],
                first_block=spec.first_block,
                head_slices=[(s.src_head, s.dst_head, s.num_heads) for s in slices],
                expected=expected,
            )
            try:
                reply = self.peers.client(address).call(message)
                self.counters.add("push_requests_sent", 1)
            except SideChannelError as exc:
                self._fail_load(spec.transfer_id, f"cannot register with {address}: {exc}")
            else:
                if isinstance(reply, Withheld):
                    self._withheld_by(reply)

    def _withheld_by(self, message: Withheld) -> None:
        # The prefill side will not push: give the load up now, not at the layer deadline.
        reason = f"prefill rank {message.sender_rank} will not push: {message.reason}"
        self._fail_load(message.transfer_id, reason)

    def _fail_load(self, transfer_id: str, reason: str) -> None:
        with self._load_cond:
            load = self._loads.get(transfer_id)
            if load is not None and not load.failed:
                load.failed = reason
            self._load_cond.notify_all()

    def _layer_arrived(self, message: LayerDone) -> None:
        with self._load_cond:
            load = self._loads.get(message.transfer_id)
            if load is None:
                return
            if not message.ok:
                load.failed = load.failed or f"prefill rank {message.sender_rank} failed to push"
            layers = range(load.num_layers) if message.layer < 0 else [message.layer]
            for layer in layers:
                load.arrived[layer].add(message.sender_rank)
            self._load_cond.notify_all()

    def wait_for_layer_load(self, layer_name: str) -> None:
        """Return at once: loads are asynchronous, no forward pass waits for a layer."""

    def _finished_loads(self) -> set[str]:
        """Request ids of loads that arrived, failed or passed their deadline since the last
        call (vLLM's `finished_recving`); failed ones also report their blocks as errors."""
        now = time.monotonic()
        with self._load_cond:
            done = [
                load
                for load in self._loads.values()
                if load.failed or load.complete() or now >= load.deadline
            ]
            for load in done:
                if not load.failed and not load.complete():
                    load.failed = (
                        f"not every layer arrived within {self.config.layer_wait_timeout_s:g} s"
                    )
                del self._loads[load.spec.transfer_id]
        for load in done:
            if load.failed and self._threads is not None:
                # Withdraw the registration: pushes the prefill side has not started yet are
                # dropped (a write already in flight cannot be recalled).
                spec = load.spec
                cancel = LoadSpec(spec.request_id, spec.transfer_id, spec.remote, [], 0)
                self._threads.submit(self._send_push_requests, cancel)
            self._count_load(load)
        return {load.spec.request_id for load in done}

    def _count_load(self, load: _Load) -> None:
        blocks = len(load.spec.block_ids)
        if not load.failed:
            self.counters.add("loads_ok", 1)
            self.counters.add("blocks_received", blocks)
            return
        self._record_load_errors(load.spec.block_ids)
        self.counters.add("loads_failed", 1)
        logger.warning(
            "request %s: %d KV blocks from %s:%d did not arrive: %s",
            load.spec.request_id,
            blocks,
            load.spec.remote.host,
            load.spec.remote.port,
            load.failed,
        )
