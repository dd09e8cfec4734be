"""The CPU offload metadata server and its clients over real ZMQ sockets (ipc/tcp loopback)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("zmq")
pytest.importorskip("msgspec")

import zmq  # noqa: E402

from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.cpu_kv_cache_manager import (  # noqa: E402
    CPUKVCacheManager,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.metadata import (  # noqa: E402
    MAX_MESSAGE_BYTES,
    Acquire,
    Commit,
    GetStats,
    Lookup,
    MetadataClient,
    MetadataServer,
    MetadataServerError,
    Register,
    StepDone,
    StoreRequest,
    client_identity,
    local_server,
)

TIMEOUT_S = 2.0


@pytest.fixture
def address(tmp_path: Path) -> str:
    return f"ipc://{tmp_path}/meta.ipc"


@pytest.fixture
def server(address: str) -> Iterator[MetadataServer]:
    srv = MetadataServer(address, CPUKVCacheManager(8, world_size=1), bytes_per_block=4096).start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("direct", [False, True], ids=["zmq", "direct"])
def test_store_then_lookup_round_trip(server: MetadataServer, address: str, direct: bool) -> None:
    sched = MetadataClient(address, TIMEOUT_S, "scheduler", direct=direct)
    worker = MetadataClient(address, TIMEOUT_S, "worker0", direct=direct)
    try:
        hashes = [b"h0", b"h1", b"h2"]
        allocations, skipped = sched.call(
            Commit(release=[], stores=[StoreRequest(owner="r1", block_hashes=hashes)])
        )
        assert skipped == 0
        ids = [block_id for _, block_id in allocations[0]]
        assert ids == [0, 1, 2]
        assert sched.call(Lookup(block_hashes=hashes)) == 0  # pending until the worker reports
        assert worker.call(Register(rank=0, world_size=1, bytes_per_block=4096)) == 8
        worker.call(
            StepDone(rank=0, stored=ids, store_failed=[], loaded_blocks=0, load_failed_blocks=0)
        )
        assert sched.call(Lookup(block_hashes=hashes)) == 3
        assert sched.call(Acquire(owner="r2", block_hashes=hashes[:2])) == [0, 1]
        stats = sched.call(GetStats())
        assert stats["pinned_blocks"] == 2 and stats["registered_workers"] == 1
        sched.call(Commit(release=["r2"], stores=[]))
        assert sched.call(GetStats())["pinned_blocks"] == 0
    finally:
        sched.close()
        worker.close()


def test_scheduler_and_worker_clients_in_one_process_do_not_collide(
    server: MetadataServer, address: str
) -> None:
    # The TP=1 uniproc case of the seed bug: both sides in this one process, same pid.
    clients = [
        MetadataClient(address, TIMEOUT_S, role, direct=False) for role in ("scheduler", "worker0")
    ]
    try:
        assert clients[0].identity != clients[1].identity
        for _ in range(3):
            for c in clients:
                assert c.call(Lookup(block_hashes=[b"x"])) == 0
    finally:
        for c in clients:
            c.close()


def test_identity_is_unique_per_client_object() -> None:
    ids = {client_identity("worker") for _ in range(100)}
    assert len(ids) == 100
    assert all(i.startswith(f"worker-{os.getpid()}-".encode()) for i in ids)


def test_a_colliding_identity_fails_with_a_timeout_not_a_hang(
    server: MetadataServer, address: str
) -> None:
    # What the pid-only identity (`worker-<pid>`) did: the ROUTER keeps the first peer and drops
    # the second one's requests. The bounded receive turns the old hang into an error.
    same = f"worker-{os.getpid()}".encode()
    first = MetadataClient(address, 1.0, "scheduler", identity=same, direct=False)
    second = MetadataClient(address, 1.0, "worker0", identity=same, direct=False)
    try:
        assert first.call(Lookup(block_hashes=[])) == 0
        started = time.monotonic()
        with pytest.raises(
            MetadataServerError, match="did not answer Lookup from worker0 within 1 s"
        ):
            second.call(Lookup(block_hashes=[]))
        assert time.monotonic() - started < 5
    finally:
        first.close()
        second.close()


def test_dead_server_gives_a_clear_error(address: str) -> None:
    client = MetadataClient(address, 0.5, "worker0")  # nothing was ever bound there
    try:
        with pytest.raises(MetadataServerError, match=r"did not answer Register .* within 0.5 s"):
            client.call(Register(rank=0, world_size=1, bytes_per_block=1))
    finally:
        client.close()


@pytest.mark.parametrize("direct", [False, True], ids=["zmq", "direct"])
def test_server_stopped_mid_session(address: str, direct: bool) -> None:
    srv = MetadataServer(address, CPUKVCacheManager(2), 1).start()
    client = MetadataClient(address, 0.5, "scheduler", direct=direct)
    try:
        assert client.call(Lookup(block_hashes=[])) == 0
        srv.stop()
        assert not srv.running
        with pytest.raises(MetadataServerError, match="did not answer"):
            client.call(Lookup(block_hashes=[]))
    finally:
        client.close()


def test_late_reply_of_a_timed_out_call_is_not_taken_for_the_next(address: str) -> None:
    client = MetadataClient(address, 0.3, "scheduler", direct=False)
    try:
        with pytest.raises(MetadataServerError):
            client.call(Lookup(block_hashes=[b"a"]))  # queued; answered once a server binds
        srv = MetadataServer(address, CPUKVCacheManager(2), 1).start()
        try:
            client.timeout_s = 2.0
            assert client.call(GetStats())["num_blocks"] == 2
        finally:
            srv.stop()
    finally:
        client.close()


@pytest.mark.parametrize("direct", [False, True], ids=["zmq", "direct"])
def test_server_reports_errors_to_the_caller(
    server: MetadataServer, address: str, direct: bool
) -> None:
    client = MetadataClient(address, TIMEOUT_S, "worker3", direct=direct)
    try:
        with pytest.raises(MetadataServerError, match="world_size=4"):
            client.call(Register(rank=3, world_size=4, bytes_per_block=4096))
        with pytest.raises(MetadataServerError, match="rank 5"):
            client.call(
                StepDone(rank=5, stored=[0], store_failed=[], loaded_blocks=0, load_failed_blocks=0)
            )
        # The server survives its callers' mistakes.
        assert client.call(Lookup(block_hashes=[])) == 0
    finally:
        client.close()


def test_bind_failure_is_reported() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        srv = MetadataServer(f"tcp://127.0.0.1:{port}", CPUKVCacheManager(1), 1)
        with pytest.raises(MetadataServerError, match="cannot bind"):
            srv.start()


def test_a_client_in_the_servers_process_calls_it_directly(
    server: MetadataServer, address: str
) -> None:
    assert local_server(address) is server
    client = MetadataClient(address, TIMEOUT_S, "scheduler")
    try:
        assert client.call(Lookup(block_hashes=[b"x"])) == 0
        assert client._sock is None  # no socket was ever opened
        # Both paths see the same manager.
        wire = MetadataClient(address, TIMEOUT_S, "worker0", direct=False)
        try:
            assert wire.call(GetStats())["lookups"] == 1
        finally:
            wire.close()
    finally:
        client.close()
    server.stop()
    assert local_server(address) is None


def test_an_oversized_frame_is_dropped_and_the_server_serves_on(
    server: MetadataServer, address: str
) -> None:
    ctx = zmq.Context.instance()
    rogue = ctx.socket(zmq.DEALER)
    rogue.setsockopt(zmq.LINGER, 0)
    rogue.connect(address)
    client = MetadataClient(address, TIMEOUT_S, "worker0", direct=False)
    try:
        # Without the cap the server decodes it and answers with an "undecodable" error reply.
        rogue.send(b"\x00" * (MAX_MESSAGE_BYTES + 1))
        assert rogue.poll(1000, zmq.POLLIN) == 0
        assert client.call(Lookup(block_hashes=[b"y"])) == 0
        assert server.running
    finally:
        rogue.close()
        client.close()


def _store_pending(client: MetadataClient, hashes: list[bytes]) -> list[int]:
    allocations, _ = client.call(
        Commit(release=[], stores=[StoreRequest(owner="r1", block_hashes=hashes)])
    )
    return [block_id for _, block_id in allocations[0]]


def test_send_does_not_wait_for_a_busy_server(server: MetadataServer, address: str) -> None:
    # The worker's StepDone: while the server cannot answer (here its dispatch lock is held, as
    # when the scheduler's process does not give its thread the GIL), sending returns at once;
    # the server applies it once it runs again.
    sched = MetadataClient(address, TIMEOUT_S, "scheduler")
    worker = MetadataClient(address, TIMEOUT_S, "worker0", direct=False)
    try:
        ids = _store_pending(sched, [b"h0", b"h1"])
        with server._dispatch_lock:
            started = time.monotonic()
            worker.send(
                StepDone(rank=0, stored=ids, store_failed=[], loaded_blocks=2, load_failed_blocks=0)
            )
            assert time.monotonic() - started < 0.5
        deadline = time.monotonic() + TIMEOUT_S
        while sched.call(Lookup(block_hashes=[b"h0", b"h1"])) != 2:
            assert time.monotonic() < deadline, "the sent StepDone was never applied"
            time.sleep(0.01)
        assert sched.call(GetStats())["loaded_blocks"] == 2
    finally:
        sched.close()
        worker.close()


def test_an_error_in_a_sent_message_is_logged_and_the_next_call_is_answered(
    server: MetadataServer, address: str, caplog: pytest.LogCaptureFixture
) -> None:
    worker = MetadataClient(address, TIMEOUT_S, "worker5", direct=False)
    try:
        worker.send(
            StepDone(rank=5, stored=[0], store_failed=[], loaded_blocks=0, load_failed_blocks=0)
        )
        # The error reply is read (and logged) before this call's own reply is taken.
        assert worker.call(Lookup(block_hashes=[])) == 0
        assert any("rank 5" in r.getMessage() for r in caplog.records)
    finally:
        worker.close()


def test_send_to_a_server_in_this_process_is_applied_before_it_returns(
    server: MetadataServer, address: str
) -> None:
    client = MetadataClient(address, TIMEOUT_S, "worker0")
    ids = _store_pending(client, [b"h0"])
    client.send(
        StepDone(rank=0, stored=ids, store_failed=[], loaded_blocks=0, load_failed_blocks=0)
    )
    assert client.call(Lookup(block_hashes=[b"h0"])) == 1
