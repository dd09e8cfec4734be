"""The Mooncake P/D worker's read path between two processes: real Mooncake TCP on loopback,
real ZMQ side channel, KV caches shaped like vLLM's CPU backend.

The prefill worker runs in a child process (`mooncake_peer.py`); the decode worker runs here.
Covers: exact bytes land in exactly the requested blocks (prefix-hit tail alignment included),
heterogeneous TP (2 -> 1 and 1 -> 2) assembling every head once, the prefill side freeing on
`ReadDone` or at its timeout, release-only notifications, and failures (dead peer, port not
listening, wrong engine id, malformed side-channel frames) reported as load errors in bounded
time without crashing either side.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("vllm")
pytest.importorskip("mooncake.engine")
zmq = pytest.importorskip("zmq")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from mooncake_peer import kv_values, rank_cache, worker_config  # noqa: E402

from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_params import (  # noqa: E402
    RecvRequest,
    RemotePrefill,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.messages import (  # noqa: E402
    Ack,
    AgentMetadata,
    Handshake,
    Rejected,
    decode_message,
    encode_message,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.pull_worker import (  # noqa: E402
    MooncakeConnectorWorker,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.side_channel import (  # noqa: E402
    SideChannelClient,
    SideChannelRejected,
    zmq_address,
)

GEOMETRY = {"layers": 2, "num_blocks": 48, "block_size": 32, "width": 128, "seed": 7}
# Generous: two CPU cores shared with other jobs. Failures must come well before these.
WAIT_S = 60.0
HANDSHAKE_TIMEOUT_S = 3.0
REPO = HERE.parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_block(count: int) -> int:
    """A base port with `count` consecutive free ports (best effort)."""
    for _ in range(50):
        base = free_port()
        try:
            socks = []
            for i in range(count):
                s = socket.socket()
                s.bind(("127.0.0.1", base + i))
                socks.append(s)
        except OSError:
            continue
        finally:
            for s in locals().get("socks", []):
                s.close()
        return base
    raise RuntimeError("no block of free ports")


class Peer:
    """A prefill worker in a child process (see mooncake_peer.py)."""

    def __init__(self, spec: dict[str, Any], log: Path) -> None:
        env = dict(os.environ, MC_LOG_LEVEL="ERROR")
        env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO), str(REPO / "subsystem"), env.get("PYTHONPATH", "")]
        )
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "mooncake_peer.py"), json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(log, "wb"),  # noqa: SIM115 - owned by the child
            start_new_session=True,
        )
        self.ready = self._read(WAIT_S)

    def _read(self, timeout_s: float) -> Any:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            raise TimeoutError(f"peer silent for {timeout_s} s:\n{self.log.read_text()[-3000:]}")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"peer exited:\n{self.log.read_text()[-3000:]}")
        return json.loads(line)

    def command(self, **cmd: Any) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        self.proc.stdin.flush()
        return self._read(WAIT_S)

    def finished_sending(self, request_id: str, timeout_s: float = WAIT_S) -> float:
        """Poll until the worker reports `request_id` as sent; return the seconds waited."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if request_id in self.command(op="finished")["sending"]:
                return time.monotonic() - started
            time.sleep(0.05)
        raise AssertionError(f"{request_id} never finished sending")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def close(self) -> None:
        # Graceful shutdown is not under test here; killing keeps the suite fast.
        self.kill()


def spec_for(
    kv_port: int, tp_size: int, total_heads: int, rank: int = 0, **extra: Any
) -> dict[str, Any]:
    return {
        **GEOMETRY,
        "engine_id": "prefill-engine",
        "kv_role": "kv_producer",
        "kv_port": kv_port,
        "tp_size": tp_size,
        "tp_rank": rank,
        "total_heads": total_heads,
        "extra": {"handshake_timeout_s": HANDSHAKE_TIMEOUT_S, **extra},
    }


@pytest.fixture
def peers(tmp_path: Path) -> Iterator[Callable[..., Peer]]:
    started: list[Peer] = []

    def start(spec: dict[str, Any]) -> Peer:
        peer = Peer(spec, tmp_path / f"peer-{len(started)}.log")
        started.append(peer)
        return peer

    yield start
    for peer in started:
        peer.close()


def decode_worker(
    tp_size: int, rank: int, total_heads: int, prefill_tp: int, **extra: Any
) -> tuple[MooncakeConnectorWorker, torch.Tensor]:
    spec = {
        **GEOMETRY,
        "engine_id": "decode-engine",
        "kv_role": "kv_consumer",
        "kv_port": free_port(),
        "tp_size": tp_size,
        "total_heads": total_heads,
        "extra": {
            "handshake_timeout_s": HANDSHAKE_TIMEOUT_S,
            "prefill": {"tp_size": prefill_tp},
            "decode": {"tp_size": tp_size},
            **extra,
        },
    }
    cache = torch.zeros_like(rank_cache(spec, rank))
    worker = MooncakeConnectorWorker(worker_config(spec), rank, GEOMETRY["num_blocks"])
    worker.register_kv_caches({f"layers.{i}": cache[i] for i in range(GEOMETRY["layers"])})
    return worker, cache


def remote(
    kv_port: int, block_ids: list[int], tp_size: int = 1, engine: str = "prefill-engine"
) -> RemotePrefill:
    return RemotePrefill(engine, "p-req", "127.0.0.1", kv_port, block_ids, tp_size)


def wait_recv(worker: MooncakeConnectorWorker, request_id: str) -> tuple[float, set[int]]:
    """Poll `get_finished` like vLLM does each step; return (seconds, failed block ids)."""
    started = time.monotonic()
    failed: set[int] = set()
    while time.monotonic() - started < WAIT_S:
        _, recving = worker.get_finished()
        failed |= worker.get_block_ids_with_load_errors()
        if recving and request_id in recving:
            return time.monotonic() - started, failed
        time.sleep(0.01)
    raise AssertionError(f"{request_id} never finished receiving")


def full_cache(total_heads: int) -> torch.Tensor:
    g = GEOMETRY
    return kv_values(
        g["layers"], g["num_blocks"], total_heads, g["block_size"], g["width"], g["seed"]
    )


# ---- same TP on both sides ------------------------------------------------------------------


def test_decode_reads_exactly_the_requested_blocks(peers: Callable[..., Peer]) -> None:
    port = free_port()
    prefill = peers(spec_for(port, tp_size=1, total_heads=2))
    prefill.command(op="send", request_id="p-req", hold_s=WAIT_S)
    worker, cache = decode_worker(1, 0, total_heads=2, prefill_tp=1)
    try:
        # Prefill holds 6 blocks; the decode side has the first 2 cached: it reads the tail 4
        # into non-contiguous local blocks (two runs).
        remote_ids = [3, 4, 9, 10, 11, 12]
        local_ids = [30, 31, 5, 6]
        worker.add_recvs([RecvRequest("d-req", local_ids, remote(port, remote_ids))])
        _, failed = wait_recv(worker, "d-req")
        assert failed == set()
        expected = torch.zeros_like(cache)
        expected[:, local_ids] = full_cache(2)[:, remote_ids[2:]]
        assert torch.equal(cache, expected)
        prefill.finished_sending("p-req")
        stats = prefill.command(op="stats")
        assert stats["read_done_received"] == 1 and stats["sends_completed"] == 1
        assert worker.stats()["blocks_read"] == 4
        assert worker.stats()["bytes_read"] == 4 * 2 * (2 * 32 * 128 * 2)
    finally:
        worker.shutdown()


def test_read_done_before_hand_over_is_matched_later(peers: Callable[..., Peer]) -> None:
    # The decode side can finish before the prefill scheduler's hand-over reaches the worker.
    port = free_port()
    prefill = peers(spec_for(port, tp_size=1, total_heads=2))
    worker, _ = decode_worker(1, 0, total_heads=2, prefill_tp=1)
    try:
        worker.add_recvs([RecvRequest("d-req", [1], remote(port, [2]))])
        wait_recv(worker, "d-req")
        deadline = time.monotonic() + WAIT_S
        while prefill.command(op="stats").get("read_done_received", 0) < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert prefill.command(op="finished")["sending"] == []  # not handed over yet
        prefill.command(op="send", request_id="p-req", hold_s=WAIT_S)
        assert prefill.finished_sending("p-req") < 5
    finally:
        worker.shutdown()


def test_release_only_request_frees_prefill_blocks(peers: Callable[..., Peer]) -> None:
    # S16: a decode request aborted before allocation reads nothing but releases the blocks.
    port = free_port()
    prefill = peers(spec_for(port, tp_size=1, total_heads=2))
    prefill.command(op="send", request_id="p-req", hold_s=WAIT_S)
    worker, cache = decode_worker(1, 0, total_heads=2, prefill_tp=1)
    try:
        worker.add_recvs([RecvRequest("d-req", [], remote(port, [1, 2]))])
        assert prefill.finished_sending("p-req") < 10
        assert worker.get_finished() == (None, None)  # nothing to report on the decode side
        assert not cache.any()
    finally:
        worker.shutdown()


def test_unread_blocks_are_freed_at_the_send_timeout(peers: Callable[..., Peer]) -> None:
    port = free_port()
    prefill = peers(spec_for(port, tp_size=1, total_heads=2))
    prefill.command(op="send", request_id="p-req", hold_s=1.0)
    waited = prefill.finished_sending("p-req")
    assert 0.5 < waited < 30
    assert prefill.command(op="stats")["sends_expired"] == 1


# ---- heterogeneous TP (S17) -------------------------------------------------------------------


def test_prefill_tp2_to_decode_tp1_assembles_every_head(peers: Callable[..., Peer]) -> None:
    base = free_port_block(2)
    ranks = [peers(spec_for(base, tp_size=2, total_heads=2, rank=r)) for r in range(2)]
    for peer in ranks:
        peer.command(op="send", request_id="p-req", hold_s=WAIT_S)
    worker, cache = decode_worker(1, 0, total_heads=2, prefill_tp=2)
    try:
        remote_ids, local_ids = [0, 1, 2, 7], [40, 41, 42, 43]
        worker.add_recvs([RecvRequest("d-req", local_ids, remote(base, remote_ids, tp_size=2))])
        _, failed = wait_recv(worker, "d-req")
        assert failed == set()
        assert torch.equal(cache[:, local_ids], full_cache(2)[:, remote_ids])
        for peer in ranks:
            peer.finished_sending("p-req")
    finally:
        worker.shutdown()


def test_prefill_tp1_to_decode_tp2_each_rank_reads_its_head(peers: Callable[..., Peer]) -> None:
    port = free_port()
    prefill = peers(spec_for(port, tp_size=1, total_heads=2))
    prefill.command(op="send", request_id="p-req", hold_s=WAIT_S)
    workers = [decode_worker(2, r, total_heads=2, prefill_tp=1) for r in range(2)]
    try:
        remote_ids, local_ids = [5, 6], [0, 9]
        full = full_cache(2)
        for rank, (worker, cache) in enumerate(workers):
            worker.add_recvs([RecvRequest("d-req", local_ids, remote(port, remote_ids))])
            _, failed = wait_recv(worker, "d-req")
            assert failed == set()
            assert torch.equal(cache[:, local_ids], full[:, remote_ids, rank : rank + 1])
            if rank == 0:
                # One of two expected readers: the prefill side keeps the blocks.
                time.sleep(0.5)
                assert prefill.command(op="finished")["sending"] == []
        prefill.finished_sending("p-req")
    finally:
        for worker, _ in workers:
            worker.shutdown()


# ---- failures (S15): bounded, reported as load errors, nothing crashes -------------------------


def test_killed_prefill_is_a_load_error_in_bounded_time(peers: Callable[..., Peer]) -> None:
    port = free_port()
    prefill = peers(spec_for(port, tp_size=1, total_heads=2))
    worker, cache = decode_worker(1, 0, total_heads=2, prefill_tp=1)
    try:
        # Warm the connection (handshake cached), then kill the prefill process.
        worker.add_recvs([RecvRequest("warm", [1], remote(port, [1]))])
        assert wait_recv(worker, "warm")[1] == set()
        prefill.kill()
        worker.add_recvs([RecvRequest("d-req", [2, 3], remote(port, [2, 3]))])
        waited, failed = wait_recv(worker, "d-req")
        assert failed == {2, 3}
        assert waited < 10 * HANDSHAKE_TIMEOUT_S
        # The decode worker keeps serving: a new prefill worker on another port works.
        port2 = free_port()
        peers(spec_for(port2, tp_size=1, total_heads=2))
        worker.add_recvs([RecvRequest("again", [4], remote(port2, [4]))])
        assert wait_recv(worker, "again")[1] == set()
        assert torch.equal(cache[:, 4], full_cache(2)[:, 4])
    finally:
        worker.shutdown()


def test_side_channel_not_listening_fails_within_the_handshake_timeout() -> None:
    worker, _ = decode_worker(1, 0, total_heads=2, prefill_tp=1)
    try:
        worker.add_recvs([RecvRequest("d-req", [7], remote(free_port(), [7]))])
        waited, failed = wait_recv(worker, "d-req")
        assert failed == {7}
        assert HANDSHAKE_TIMEOUT_S * 0.5 < waited < HANDSHAKE_TIMEOUT_S * 5
    finally:
        worker.shutdown()


def test_wrong_engine_id_is_a_load_error(peers: Callable[..., Peer]) -> None:
    port = free_port()
    peers(spec_for(port, tp_size=1, total_heads=2))
    worker, cache = decode_worker(1, 0, total_heads=2, prefill_tp=1)
    try:
        recv = RecvRequest("d-req", [1], remote(port, [1], engine="someone-else"))
        worker.add_recvs([recv])
        assert wait_recv(worker, "d-req")[1] == {1}
        assert not cache.any()
    finally:
        worker.shutdown()


def test_malformed_side_channel_messages_are_dropped(peers: Callable[..., Peer]) -> None:
    port = free_port()
    prefill = peers(spec_for(port, tp_size=1, total_heads=2))
    address = zmq_address("127.0.0.1", port)
    ctx = zmq.Context()
    try:
        raw = ctx.socket(zmq.DEALER)
        raw.setsockopt(zmq.LINGER, 0)
        raw.connect(address)
        for junk in (
            b"not msgpack \xff\xfe",
            b"",
            encode_message(Ack())[:1],
            b"\x81\xa4type\xa3Bad",
        ):
            raw.send(junk)
        # Dropped: no reply comes back for any of them.
        assert raw.poll(1000) == 0
        raw.close(0)
        client = SideChannelClient(address, 10.0)
        # A valid message of the wrong kind is refused, not fatal.
        with pytest.raises(SideChannelRejected):
            client.call(Ack())
        reply = client.call(Handshake("tester", 0))
        assert isinstance(reply, AgentMetadata) and reply.engine_id == "prefill-engine"
        client.close()
        assert prefill.command(op="stats")["malformed_dropped"] == 4
        assert "dropped a malformed side-channel message" in prefill.log.read_text()
    finally:
        ctx.term()


def test_reply_decoding_round_trip() -> None:
    assert decode_message(encode_message(Rejected(reason="x"))) == Rejected(reason="x")
