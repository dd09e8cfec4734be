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

from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.cpu_kv_cache_manager import (  # noqa: E402
    CPUKVCacheManager,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.metadata import (  # noqa: E402
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


def test_store_then_lookup_round_trip(server: MetadataServer, address: str) -> None:
    sched = MetadataClient(address, TIMEOUT_S, "scheduler")
    worker = MetadataClient(address, TIMEOUT_S, "worker0")
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
    clients = [MetadataClient(address, TIMEOUT_S, role) for role in ("scheduler", "worker0")]
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
    first = MetadataClient(address, 1.0, "scheduler", identity=same)
    second = MetadataClient(address, 1.0, "worker0", identity=same)
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


def test_server_stopped_mid_session(address: str) -> None:
    srv = MetadataServer(address, CPUKVCacheManager(2), 1).start()
    client = MetadataClient(address, 0.5, "scheduler")
    try:
        assert client.call(Lookup(block_hashes=[])) == 0
        srv.stop()
        assert not srv.running
        with pytest.raises(MetadataServerError, match="did not answer"):
            client.call(Lookup(block_hashes=[]))
    finally:
        client.close()


def test_late_reply_of_a_timed_out_call_is_not_taken_for_the_next(address: str) -> None:
    client = MetadataClient(address, 0.3, "scheduler")
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


def test_server_reports_errors_to_the_caller(server: MetadataServer, address: str) -> None:
    client = MetadataClient(address, TIMEOUT_S, "worker3")
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
