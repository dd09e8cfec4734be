"""Prefill side of the layerwise Mooncake worker: pushing each computed layer to its readers.

`save_kv_layer(layer)` queues, for each request computed this step, a push of that layer's
blocks to every decode worker registered for its `transfer_id` (`batch_write` on a transfer
thread; one request's pushes stay in order). Pushes for a decode worker that has not registered
yet are kept and replayed when its `PushRequest` arrives. After the step that completes the
prompt, each pushed layer is confirmed with `LayerDone`; once every expected decode worker has
all layers (or gave up), the request's blocks are released through `get_finished`, at the
latest after `send_timeout_s`. A transfer the scheduler will not push
(`LayerwiseMetadata.withheld`) is announced to its decode workers at once (`Withheld`), and a
later `PushRequest` for it is answered `Withheld`.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_metadata import SaveSpec
from vllm_ascend.distributed.kv_transfer.kv_p2p.messages import (
    Ack,
    LayerDone,
    Message,
    PushRequest,
    Withheld,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.side_channel import SideChannelError
from vllm_ascend.distributed.kv_transfer.kv_p2p.tp_mapping import HeadSlice
from vllm_ascend.distributed.kv_transfer.kv_p2p.transfer_plan import plan_transfer
from vllm_ascend.distributed.kv_transfer.kv_p2p.worker_base import P2PWorkerBase
from vllm_ascend.distributed.kv_transfer.utils.device import DeviceEvent, KVDevice
from vllm_ascend.logger import init_logger

__all__ = ["LayerwisePushes"]

logger = init_logger(__name__)


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


class LayerwisePushes(P2PWorkerBase):
    """The prefill half of `MooncakeLayerwiseWorker` (its own lock and state)."""

    def __init__(self, config: MooncakeP2PConfig, tp_rank: int, num_blocks: int) -> None:
        super().__init__(config, tp_rank, num_blocks)
        self.device: KVDevice | None = None
        self._push_lock = threading.Lock()
        self._pushes: dict[str, _Push] = {}  # transfer id -> push state
        self._step_saves: list[SaveSpec] = []
        # Transfers the scheduler will not push: transfer id -> (reason, when it said so).
        self._withheld: dict[str, tuple[str, float]] = {}

    def start_saves(self, saves: list[SaveSpec], sends: dict[str, float]) -> None:
        """Take this step's saves, and the finished requests whose blocks wait for readers."""
        now = time.monotonic()
        for request_id, hold_s in sends.items():
            self.sends.add(request_id, hold_s, now)
        with self._push_lock:
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
        layer = self.layout.layer_number(layer_name) if self.layout is not None else None
        if layer is None:
            return
        # The layer's KV is written by work queued on the device: push after it completes.
        ready = self.device.record_event()
        for spec in self._step_saves:
            job = _Job(layer, spec.block_ids, spec.start_block, spec.end_block, spec.final, ready)
            with self._push_lock:
                push = self._pushes[spec.transfer_id]
                push.jobs.append(job)
                readers = list(push.readers.values())
            for reader in readers:
                if not self._threads.submit(self._push, push, reader, job, key=spec.transfer_id):
                    self._refused(push, reader)

    def withhold(self, withheld: dict[str, str]) -> None:
        """Tell the decode workers registered for these transfers (transfer id -> reason) at
        once that nothing will be pushed; later registrations get a `Withheld` reply."""
        assert self._threads is not None
        now = time.monotonic()
        for transfer_id, reason in withheld.items():
            with self._push_lock:
                self._withheld[transfer_id] = (reason, now)
                push = self._pushes.pop(transfer_id, None)
                readers = list(push.readers.values()) if push is not None else []
            for reader in readers:
                if reader.block_ids:
                    self._threads.submit(self._tell_withheld, transfer_id, reader, reason)

    def _tell_withheld(self, transfer_id: str, reader: PushRequest, reason: str) -> None:
        message = Withheld(transfer_id, self.tp_rank, reason)
        try:
            self.peers.client(reader.agent.side_channel).call(message)
        except SideChannelError as exc:
            logger.warning("transfer %s: cannot reach %s: %s", transfer_id, reader.reader, exc)

    def _register_reader(self, message: PushRequest) -> Message:
        assert self._threads is not None
        with self._push_lock:
            withheld = self._withheld.get(message.transfer_id)
        if withheld is not None:
            return Withheld(message.transfer_id, self.tp_rank, withheld[0])
        with self._push_lock:
            push = self._pushes.setdefault(message.transfer_id, _Push(message.transfer_id))
            push.readers[message.reader] = message
            jobs = list(push.jobs)
            if not message.block_ids:
                push.finished[message.reader] = True
                self._note_finished(push)
        self.counters.add("push_requests_received", 1)
        for job in jobs if message.block_ids else []:
            if not self._threads.submit(self._push, push, message, job, key=message.transfer_id):
                self._refused(push, message)
                break
        return Ack()

    def _refused(self, push: _Push, reader: PushRequest) -> None:
        # The transfer queue is full (TransferThreads logged it): this reader's transfer fails
        # and its later pushes are skipped; the decode side gives the load up at its layer
        # deadline, and the blocks are released as for any failed reader.
        with self._push_lock:
            push.finished.setdefault(reader.reader, False)
            self._note_finished(push)

    def _push(self, push: _Push, reader: PushRequest, job: _Job) -> None:
        with self._push_lock:
            if reader.reader in push.finished:
                return  # this reader already failed
        ok = True
        try:
            job.ready.synchronize()
            self._write_layer(reader, job)
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

    def _write_layer(self, reader: PushRequest, job: _Job) -> None:
        assert self.agent is not None and self.engine is not None and self.layout is not None
        indices = [
            i
            for i in range(job.start_block, job.end_block)
            if reader.first_block <= i < reader.first_block + len(reader.block_ids)
            and i < len(job.block_ids)
        ]
        if not indices:
            return
        # Slices are (src = prefill offset, dst = decode offset); here the prefill worker is
        # the local side of the transfer.
        slices = [HeadSlice(self.tp_rank, dst, src, n) for src, dst, n in reader.head_slices]
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

    def _confirm(self, push: _Push, reader: PushRequest, layer: int, ok: bool) -> None:
        assert self.layout is not None
        message = LayerDone(push.transfer_id, self.tp_rank, layer, ok)
        try:
            self.peers.client(reader.agent.side_channel).call(message)
        except SideChannelError as exc:
            ok = False
            logger.warning("transfer %s: cannot reach %s: %s", push.transfer_id, reader.reader, exc)
        with self._push_lock:
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

    def _forget_pushes(self, finished: set[str]) -> None:
        if not finished and not self._pushes and not self._withheld:
            return
        now = time.monotonic()
        with self._push_lock:
            for transfer_id, push in list(self._pushes.items()):
                stale = now - push.created > 2 * self.config.send_timeout_s
                if push.request_id in finished or stale:
                    del self._pushes[transfer_id]
            for transfer_id, (_, when) in list(self._withheld.items()):
                if now - when > 2 * self.config.send_timeout_s:
                    del self._withheld[transfer_id]
