"""The bounded transfer queue of the Mooncake P/D connectors (`transfer_queue_size`).

`TransferThreads` refuses a transfer once the bound is reached, logging once per time the queue
fills up; the decode worker turns a refused read into a load failure at once (real Mooncake
transfer engine and ZMQ side channel; the read ahead of it waits on a side channel that does
not answer, which keeps the single transfer thread busy).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("vllm")
pytest.importorskip("mooncake.engine")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_mooncake_p2p_units import config  # noqa: E402
from test_mooncake_p2p_worker import decode_worker, free_port, remote, wait_recv  # noqa: E402

from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_params import RecvRequest  # noqa: E402
from vllm_ascend.distributed.kv_transfer.kv_p2p.threads import TransferThreads  # noqa: E402

WAIT_S = 30.0


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def threads_log() -> Iterator[Records]:
    logger = logging.getLogger("vllm.vllm_ascend.distributed.kv_transfer.kv_p2p.threads")
    handler = Records()
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def test_transfer_queue_size_is_a_positive_integer_with_a_default() -> None:
    assert config().transfer_queue_size == 1024
    assert config({"transfer_queue_size": 8}).transfer_queue_size == 8
    for bad in (0, -1, 2.5, "many"):
        with pytest.raises(ValueError, match="transfer_queue_size"):
            config({"transfer_queue_size": bad})


def test_a_full_queue_refuses_new_transfers_and_logs_once(threads_log: Records) -> None:
    pool = TransferThreads(1, "test-xfer", max_queued=2)
    busy, release = threading.Event(), threading.Event()
    ran: list[str] = []
    done = threading.Semaphore(0)

    def block() -> None:
        busy.set()
        release.wait(WAIT_S)

    def note(name: str) -> None:
        ran.append(name)
        done.release()

    try:
        assert pool.submit(block)
        assert busy.wait(WAIT_S)  # the only thread is taken: what follows waits in the queue
        assert pool.submit(note, "a")
        assert pool.submit(note, "k1", key="k")
        assert not pool.submit(note, "b")  # two entries wait: full
        assert not pool.submit(note, "other", key="other")  # a new chain is refused too
        assert pool.submit(note, "k2", key="k")  # joins its queued chain, never refused
        assert [line for line in threads_log.lines if "full" in line] == [
            "test-xfer: transfer queue full (2 waiting; transfer_queue_size): new transfers "
            "fail until it has room again"
        ]
        release.set()
        for _ in range(3):
            assert done.acquire(timeout=WAIT_S)
        assert sorted(ran) == ["a", "k1", "k2"] and ran.index("k1") < ran.index("k2")
        assert any("2 transfer(s) failed while it was full" in line for line in threads_log.lines)
        assert pool.submit(note, "c")  # room again
        assert done.acquire(timeout=WAIT_S) and ran[-1] == "c"
    finally:
        release.set()
        pool.stop()


def test_a_read_refused_by_a_full_queue_fails_at_once() -> None:
    worker, _ = decode_worker(
        1,
        0,
        total_heads=2,
        prefill_tp=1,
        num_transfer_threads=1,
        transfer_queue_size=1,
        handshake_timeout_s=10,
    )
    silent = free_port()  # nothing listens: a read there waits for the handshake timeout
    try:
        worker.add_recvs([RecvRequest("running", [1], remote(silent, [1]))])
        deadline = time.monotonic() + WAIT_S
        while worker.stats()["queued_reads"]:  # until the only thread has taken it
            assert time.monotonic() < deadline
            time.sleep(0.01)
        worker.add_recvs(
            [
                RecvRequest("queued", [2], remote(silent, [2])),
                RecvRequest("refused", [3, 4], remote(silent, [3, 4])),
            ]
        )
        # Reported in the very next step, while the reads ahead of it still wait.
        _, recving = worker.get_finished()
        assert recving == {"refused"}
        assert worker.get_block_ids_with_load_errors() == {3, 4}
        assert worker.stats()["in_flight_reads"] == 2
        assert worker.stats()["reads_failed"] == 1
        # The two others fail at their handshake timeout, each reported once.
        assert wait_recv(worker, "running")[1] == {1}
        assert wait_recv(worker, "queued")[1] == {2}
    finally:
        worker.shutdown()
