"""Worker side of the layerwise Mooncake connector (push mode).

Every worker registers its KV cache with the process-wide transfer engine and serves the side
channel on `kv_port + dp_rank * tp_size + tp_rank` (both roles: the prefill worker receives
`PushRequest`s, the decode worker `LayerDone`s).

Decode worker: for each `LoadSpec` of the step, a transfer thread sends a `PushRequest` (this
worker's `AgentMetadata`, its blocks, the head slices it takes) to every prefill worker it
reads from, and a release-only one to the prefill workers it is assigned to but does not read.
During the forward pass `wait_for_layer_load(layer)` blocks until every expected prefill worker
reported that layer written (`LayerDone`), the request failed, or `layer_wait_timeout_s` since
the step started passed; a request that did not complete reports its blocks through
`get_block_ids_with_load_errors` in the same step (vLLM's synchronous-load failure path).

Prefill worker: `save_kv_layer(layer)` queues, for each request computed this step, a push of
that layer's blocks to every decode worker registered for its `transfer_id` (`batch_write`
on a transfer thread; one request's pushes stay in order). Pushes for a decode worker that has
not registered yet are kept and replayed when its `PushRequest` arrives. After the step that
completes the prompt, each pushed layer is confirmed with `LayerDone`; once every expected
decode worker has all layers (or gave up), the request's blocks are released through
`get_finished`, at the latest after `send_timeout_s`.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_metadata import (
    LayerwiseMetadata,
    LoadSpec,
    SaveSpec,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.messages import (
    Ack,
    Handshake,
    LayerDone,
    Message,
    PushRequest,
    Rejected,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.side_channel import (
    SideChannelError,
    SideChannelServer,
    zmq_address,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.threads import TransferThreads
from vllm_ascend.distributed.kv_transfer.kv_p2p.tp_mapping import (
    HeadSlice,
    expected_notifications,
    notified_prefill_ranks,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.transfer_plan import plan_transfer
from vllm_ascend.distributed.kv_transfer.kv_p2p.worker_base import (
    P2PWorkerBase,
    make_agent_metadata,
)
from vllm_ascend.distributed.kv_transfer.utils.device import DeviceEvent, KVDevice, resolve_device
from vllm_ascend.logger import init_logger

__all__ = ["MooncakeLayerwiseWorker"]

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

    def layer_complete(self, layer: int) -> bool:
        return len(self.arrived[layer]) >= self.senders


@dataclass(frozen=True)
class _Job:
    """One layer of one step of a prefill request, to push to every registered reader.

    `ready` completes when the device has written the layer (at once on the CPU).
    """

    layer: int
    block_ids: list[int]
    start_block: int
    end_block: int
    final: bool
    ready: DeviceEvent


@dataclass
class _Push:
    """Prefill side state of one transfer id."""

    transfer_id: str
    request_id: str = ""
    jobs: list[_Job] = field(default_factory=list)
    readers: dict[str, PushRequest] = field(default_factory=dict)
    layers_done: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    finished: dict[str, bool] = field(default_factory=dict)  # reader -> ok
    noted: set[str] = field(default_factory=set)
    created: float = field(default_factory=time.monotonic)


class MooncakeLayerwiseWorker(P2PWorkerBase):
    """One worker's half of the layerwise connector (shared state and steps:
    `worker_base.py`).

    Args:
        config: the connector's settings.
        tp_rank: this worker's tensor-parallel rank.
        num_blocks: KV cache blocks (`KVCacheConfig.num_blocks`).
    """

    def __init__(self, config: MooncakeP2PConfig, tp_rank: int, num_blocks: int) -> None:
        super().__init__(config, tp_rank, num_blocks)
        self.device: KVDevice | None = None
        self._layer_index: dict[str, int] = {}
        self._cond = threading.Condition()
        self._loads: dict[str, _Load] = {}  # transfer id -> load of the current step
        self._step_loads: list[_Load] = []
        self._failed_blocks: set[int] = set()
        self._pushes: dict[str, _Push] = {}  # transfer id -> push state
        self._step_saves: list[SaveSpec] = []

    # ---- set-up ---------------------------------------------------------------------------

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
        self.device = resolve_device(layout.tensors)
        self._layer_index = {name: i for i, name in enumerate(layout.layer_names)}
        port = config.worker_port(self.tp_rank)
        self.agent = make_agent_metadata(
            config,
            self.tp_rank,
            layout,
            self.engine.session_id,
            zmq_address(config.side_channel_host, port),
        )
        self.server = SideChannelServer(
            config.side_channel_host,
            port,
            self.handle_message,
            name=f"mooncake-layerwise-side-channel-{self.tp_rank}",
        ).start()
        self._threads = TransferThreads(config.num_transfer_threads, "mooncake-layerwise")

    def handle_message(self, message: Message) -> Message | None:
        """Side-channel handler (server thread)."""
        if isinstance(message, Handshake):
            assert self.agent is not None
            return self.agent
        if isinstance(message, PushRequest) and self.config.is_producer:
            self._register_reader(message)
            return Ack()
        if isinstance(message, LayerDone) and self.config.is_consumer:
            self._layer_arrived(message)
            return Ack()
        return Rejected(reason=f"unexpected {type(message).__name__}")

    def _layer_index_of(self, layer_name: str) -> int | None:
        # A layer without its own KV cache (shared across layers) has nothing to move.
        return self._layer_index.get(layer_name)

    # ---- decode side ----------------------------------------------------------------------

    def start_loads(self, loads: list[LoadSpec], releases: list[LoadSpec]) -> None:
        """Register this step's loads with their prefill workers (on transfer threads)."""
        assert self._threads is not None and self.layout is not None
        deadline = time.monotonic() + self.config.layer_wait_timeout_s
        num_layers = len(self.layout.layer_names)
        with self._cond:
            self._step_loads = []
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
                self._step_loads.append(load)
        for spec in [*loads, *releases]:
            self._threads.submit(self._send_push_requests, spec)

    def _send_push_requests(self, spec: LoadSpec) -> None:
        assert self.agent is not None
        remote = spec.remote
        heads = self.config.total_kv_heads
        try:
            senders = self._slices_by_prefill_rank(remote.tp_size)
            ranks = notified_prefill_ranks(remote.tp_size, self.config.tp_size, heads, self.tp_rank)
        except ValueError as exc:
            logger.warning(
                "request %s: cannot register with the prefill side: %s", spec.request_id, exc
            )
            return
        for prefill_rank in ranks:
            slices = senders.get(prefill_rank, []) if spec.block_ids else []
            message = PushRequest(
                transfer_id=spec.transfer_id,
                reader=self.reader_name,
                agent=self.agent,
                block_ids=list(spec.block_ids) if slices else [],
                first_block=spec.first_block,
                head_slices=[(s.src_head, s.dst_head, s.num_heads) for s in slices],
                expected=expected_notifications(
                    remote.tp_size, self.config.tp_size, heads, prefill_rank
                ),
            )
            address = zmq_address(remote.host, remote.port + prefill_rank)
            try:
                self.peers.client(address).call(message)
                self.counters.add("push_requests_sent", 1)
            except SideChannelError as exc:
                self._fail_load(spec.transfer_id, f"cannot register with {address}: {exc}")

    def _fail_load(self, transfer_id: str, reason: str) -> None:
        with self._cond:
            load = self._loads.get(transfer_id)
            if load is not None and not load.failed:
                load.failed = reason
            self._cond.notify_all()

    def _layer_arrived(self, message: LayerDone) -> None:
        with self._cond:
            load = self._loads.get(message.transfer_id)
            if load is None:
                return
            if not message.ok:
                load.failed = load.failed or f"prefill rank {message.sender_rank} failed to push"
            layers = range(load.num_layers) if message.layer < 0 else [message.layer]
            for layer in layers:
                load.arrived[layer].add(message.sender_rank)
            self._cond.notify_all()

    def wait_for_layer_load(self, layer_name: str) -> None:
        """Block until `layer_name` of every load of this step arrived, failed or timed out."""
        layer = self._layer_index_of(layer_name)
        if not self._step_loads or layer is None:
            return
        with self._cond:
            for load in self._step_loads:
                while not load.failed and not load.layer_complete(layer):
                    left = load.deadline - time.monotonic()
                    if left <= 0:
                        load.failed = (
                            f"layer {layer} did not arrive within "
                            f"{self.config.layer_wait_timeout_s:g} s"
                        )
                        break
                    self._cond.wait(left)

    def _finish_step_loads(self) -> None:
        with self._cond:
            step, self._step_loads = self._step_loads, []
        for load in step:
            if load.failed and self._threads is not None:
                # Withdraw the registration: pushes the prefill side has not started yet are
                # dropped (a write already in flight cannot be recalled).
                spec = load.spec
                cancel = LoadSpec(spec.request_id, spec.transfer_id, spec.remote, [], 0)
                self._threads.submit(self._send_push_requests, cancel)
        with self._cond:
            for load in step:
                self._loads.pop(load.spec.transfer_id, None)
                blocks = len(load.spec.block_ids)
                if load.failed:
                    self._failed_blocks.update(load.spec.block_ids)
                    self.counters.add("loads_failed", 1)
                    logger.warning(
                        "request %s: %d KV blocks from %s:%d did not arrive: %s",
                        load.spec.request_id,
                        blocks,
                        load.spec.remote.host,
                        load.spec.remote.port,
                        load.failed,
                    )
                else:
                    self.counters.add("loads_ok", 1)
                    self.counters.add("blocks_received", blocks)

    # ---- prefill side ---------------------------------------------------------------------

    def start_saves(self, saves: list[SaveSpec], sends: dict[str, float]) -> None:
        now = time.monotonic()
        for request_id, hold_s in sends.items():
            self.sends.add(request_id, hold_s, now)
        with self._cond:
            self._step_saves = list(saves)
            for spec in saves:
                push = self._pushes.setdefault(spec.transfer_id, _Push(spec.transfer_id))
                push.request_id = spec.request_id
                self._note_finished(push)

    def save_kv_layer(self, layer_name: str) -> None:
        """Queue this layer's pushes for every request computed this step."""
        if not self._step_saves:
            return
        assert self._threads is not None and self.device is not None
        layer = self._layer_index_of(layer_name)
        if layer is None:
            return
        # The layer's KV is written by work queued on the device: push after it completes.
        ready = self.device.record_event()
        for spec in self._step_saves:
            job = _Job(layer, spec.block_ids, spec.start_block, spec.end_block, spec.final, ready)
            with self._cond:
                push = self._pushes[spec.transfer_id]
                push.jobs.append(job)
                readers = list(push.readers.values())
            for reader in readers:
                self._threads.submit(self._push, push, reader, job, key=spec.transfer_id)

    def _register_reader(self, message: PushRequest) -> None:
        assert self._threads is not None
        with self._cond:
            push = self._pushes.setdefault(message.transfer_id, _Push(message.transfer_id))
            push.readers[message.reader] = message
            jobs = list(push.jobs)
            if not message.block_ids:
                push.finished[message.reader] = True
                self._note_finished(push)
        self.counters.add("push_requests_received", 1)
        for job in jobs if message.block_ids else []:
            self._threads.submit(self._push, push, message, job, key=message.transfer_id)

    def _push(self, push: _Push, reader: PushRequest, job: _Job) -> None:
        assert self.agent is not None and self.engine is not None and self.layout is not None
        with self._cond:
            if reader.reader in push.finished:
                return  # this reader already failed
        ok = True
        try:
            job.ready.synchronize()
            indices = [
                i
                for i in range(job.start_block, job.end_block)
                if reader.first_block <= i < reader.first_block + len(reader.block_ids)
                and i < len(job.block_ids)
            ]
            if indices:
                # Slices are (src = prefill offset, dst = decode offset); here the prefill
                # worker is the local side of the transfer.
                slices = [
                    HeadSlice(self.tp_rank, dst, src, n) for src, dst, n in reader.head_slices
                ]
                lists = plan_transfer(
                    self.agent,
                    reader.agent,
                    [job.block_ids[i] for i in indices],
                    [reader.block_ids[i - reader.first_block] for i in indices],
                    slices,
                    regions=self.layout.regions_of_layer(job.layer),
                )
                self.engine.batch_write(reader.agent.session_id, *lists)
                self.counters.add("bytes_pushed", sum(lists[2]))
        except Exception as exc:  # reported to the reader; the blocks are released
            ok = False
            logger.warning(
                "transfer %s: pushing layer %d to %s failed: %s",
                push.transfer_id,
                job.layer,
                reader.reader,
                exc,
            )
        if job.final or not ok:
            self._confirm(push, reader, job.layer if ok else -1, ok)

    def _confirm(self, push: _Push, reader: PushRequest, layer: int, ok: bool) -> None:
        assert self.layout is not None
        message = LayerDone(push.transfer_id, self.tp_rank, layer, ok)
        try:
            self.peers.client(reader.agent.side_channel).call(message)
        except SideChannelError as exc:
            ok = False
            logger.warning("transfer %s: cannot reach %s: %s", push.transfer_id, reader.reader, exc)
        with self._cond:
            done = push.layers_done[reader.reader]
            if ok:
                done.add(layer)
            if not ok or len(done) >= len(self.layout.layer_names):
                push.finished[reader.reader] = ok
                self._note_finished(push)

    def _note_finished(self, push: _Push) -> None:
        # Called with the lock held: tell the send tracker about readers that are done, once
        # the prefill request id is known.
        if not push.request_id:
            return
        for reader, ok in push.finished.items():
            if reader in push.noted:
                continue
            push.noted.add(reader)
            expected = push.readers[reader].expected if reader in push.readers else 1
            self.sends.note(push.request_id, reader, expected, time.monotonic())
            self.counters.add("readers_done" if ok else "readers_failed", 1)

    # ---- results --------------------------------------------------------------------------

    def get_finished(self) -> tuple[set[str] | None, set[str] | None]:
        """`(finished sends, None)`: layerwise loads finish inside the forward pass."""
        self._finish_step_loads()
        if not self.config.is_producer:
            return None, None
        finished = self._pop_finished_sends(
            "prefill request %s: its KV was not delivered within %.0f s; freeing its blocks"
        )
        if finished or self._pushes:
            self._forget_pushes(finished)
        return finished or None, None

    def _forget_pushes(self, finished: set[str]) -> None:
        now = time.monotonic()
        with self._cond:
            for transfer_id, push in list(self._pushes.items()):
                stale = now - push.created > 2 * self.config.send_timeout_s
                if push.request_id in finished or stale:
                    del self._pushes[transfer_id]

    def get_block_ids_with_load_errors(self) -> set[int]:
        with self._cond:
            failed, self._failed_blocks = self._failed_blocks, set()
        return failed

    def stats(self) -> dict[str, float]:
        """Counters of this worker (loads, pushes, readers, sends)."""
        return self._send_stats()

    def shutdown(self) -> None:
        """Stop serving and pushing; the KV cache memory stays registered with the engine."""
        self._stop_serving()

    def bind(self, meta: LayerwiseMetadata) -> None:
        """Take this step's metadata (called from `start_load_kv`, before the forward)."""
        self.start_saves(meta.saves, meta.sends)
        self.start_loads(meta.loads, meta.releases)
