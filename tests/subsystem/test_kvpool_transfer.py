"""The worker's transfer machinery: block addresses, the failure guard, batched transfers and the
sending/receiving threads, against a real Mooncake store on loopback."""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mooncake.store")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from kvpool_fixtures import module_master  # noqa: E402
from kvpool_master import MooncakeMaster  # noqa: E402

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.mooncake_backend import (  # noqa: E402
    MooncakeBackend,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.kv_transfer import (  # noqa: E402
    KVCacheLayout,
    KVCacheStoreRecvingThread,
    KVCacheStoreSendingThread,
    PoolGuard,
    RateLimitedLog,
    TransferTask,
    load_blocks,
    save_blocks,
)

NUM_BLOCKS = 16


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# ---- block addresses -------------------------------------------------------------------------


def _bytes_at(addr: int, size: int) -> bytes:
    import ctypes

    return ctypes.string_at(addr, size)


def test_layout_of_block_first_and_kv_split_tensors() -> None:
    # Layer 0: [num_blocks, 32 tokens, 64] (block axis 0); layer 1: [2, num_blocks, 32, 64].
    a = torch.randn(NUM_BLOCKS, 32, 64)
    b = torch.randn(2, NUM_BLOCKS, 32, 64)
    layout = KVCacheLayout([a, b], NUM_BLOCKS)
    block = 32 * 64 * 4
    assert layout.segments_per_block == 3 and layout.bytes_per_block == 3 * block
    addrs, sizes = layout.segments(5)
    assert sizes == [block] * 3
    assert _bytes_at(addrs[0], block) == a[5].numpy().tobytes()
    assert _bytes_at(addrs[1], block) == b[0, 5].numpy().tobytes()
    assert _bytes_at(addrs[2], block) == b[1, 5].numpy().tobytes()
    assert sorted(layout.buffers) == sorted([(a.data_ptr(), a.nbytes), (b.data_ptr(), b.nbytes)])
    with pytest.raises(IndexError, match="block id 16 outside"):
        layout.segments(NUM_BLOCKS)


def test_layers_side_by_side_in_one_tensor_merge_into_one_segment() -> None:
    # A block-major KV cache: one buffer, each layer a strided view of it.
    raw = torch.randn(NUM_BLOCKS, 2, 32, 64)
    layers = [raw[:, 0], raw[:, 1]]
    layout = KVCacheLayout(layers, NUM_BLOCKS)
    assert layout.segments_per_block == 1
    addrs, sizes = layout.segments(3)
    assert sizes == [2 * 32 * 64 * 4]
    assert _bytes_at(addrs[0], sizes[0]) == raw[3].numpy().tobytes()
    assert layout.buffers == [(raw.data_ptr(), raw.nbytes)]  # one storage, registered once


def test_non_contiguous_blocks_are_rejected() -> None:
    t = torch.randn(32, NUM_BLOCKS, 64).transpose(0, 1)  # block axis 0, but strided inside
    with pytest.raises(ValueError, match="not one contiguous byte range"):
        KVCacheLayout([t], NUM_BLOCKS)
    with pytest.raises(ValueError, match="cannot find the block axis"):
        KVCacheLayout([torch.zeros(3, 3)], NUM_BLOCKS)


# ---- rate-limited logging and the guard ------------------------------------------------------


def test_rate_limited_log_counts_what_it_suppressed(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    log = RateLimitedLog(logging.getLogger("vllm.test_kvpool"), 10.0, clock)
    with caplog.at_level(logging.WARNING, logger="vllm.test_kvpool"):
        assert log.warning("a", "first %d", 1)
        assert not log.warning("a", "second %d", 2)
        assert not log.warning("a", "third %d", 3)
        assert log.warning("b", "other kind")  # kinds are independent
        clock.now += 10
        assert log.warning("a", "fourth %d", 4)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "first 1",
        "other kind",
        "fourth 4 (2 similar event(s) in the last 10 s not logged)",
    ]


master = module_master()


@pytest.fixture(scope="module")
def backend(master: MooncakeMaster) -> Iterator[MooncakeBackend]:
    b = MooncakeBackend(None, master.store_config(global_segment_size="32MB"))
    yield b
    b.close()


def test_guard_bypasses_the_pool_after_a_failure_until_a_trial_call_is_answered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    m = MooncakeMaster(tmp_path).start()
    store = MooncakeBackend(None, m.store_config(global_segment_size=0), lookup_only=True)
    clock = Clock()
    guard = PoolGuard(store, retry_interval_s=5, log_interval_s=60, side="test", clock=clock)
    try:
        assert guard.available("lookup") and guard.healthy
        m.kill()
        with caplog.at_level(logging.WARNING):
            try:
                store.exists(["k"])
            except Exception as exc:  # BackendError
                guard.failed("lookup", exc)
            assert not guard.healthy
            assert not guard.available("lookup")  # within the retry interval: no probe
            clock.now += 5
            assert not guard.available("lookup")  # probe: connection refused
            assert not guard.available("save")
            guard.failed("save", RuntimeError("again"))  # the same loss: no second line
            m.start()
            assert not guard.available("lookup")  # still within the interval of the probe
            clock.now += 5
            # The probe connects: one trial call may go, but only its answer is a recovery.
            assert guard.available("lookup") and not guard.healthy
            assert not guard.available("lookup")  # one trial per interval
            store.exists(["k"])
            guard.succeeded("lookup")
            assert guard.healthy and guard.available("lookup")
        lines = [r.getMessage() for r in caplog.records if "KV pool" in r.getMessage()]
        assert len(lines) == 2, lines
        assert "unavailable during lookup" in lines[0] and m.address in lines[0]
        assert "answers again" in lines[1] and "'lookup': 4" in lines[1] and m.address in lines[1]
    finally:
        store.close()
        m.stop()


# ---- batched transfers and the threads -------------------------------------------------------


def _cache() -> torch.Tensor:
    return torch.zeros(2, NUM_BLOCKS, 32, 64)


def _keys(n: int) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    return [f"xfer/{tag}/{i}" for i in range(n)]


def test_save_then_load_blocks_between_two_kv_caches(backend: MooncakeBackend) -> None:
    src, dst = torch.randn(2, NUM_BLOCKS, 32, 64), _cache()
    src_layout, dst_layout = KVCacheLayout([src], NUM_BLOCKS), KVCacheLayout([dst], NUM_BLOCKS)
    guard = PoolGuard(backend, 5, 60, "test")
    keys = _keys(6)
    stored, failures = save_blocks(backend, guard, src_layout, keys, [0, 2, 4, 6, 8, 10], 4)
    assert (stored, failures) == (6, {})
    # Load into other block ids, with one key that was never stored.
    failed = load_blocks(
        backend, guard, dst_layout, [*keys[:3], "xfer/none"], [15, 14, 13, 12], batch_keys=2
    )
    assert failed == [12]
    for s, d in ((0, 15), (2, 14), (4, 13)):
        assert torch.equal(dst[:, d], src[:, s])
    assert torch.count_nonzero(dst[:, 12]) == 0


def test_a_bypassed_pool_fails_loads_and_skips_saves_without_calls(
    backend: MooncakeBackend,
) -> None:
    layout = KVCacheLayout([_cache()], NUM_BLOCKS)
    clock = Clock()
    guard = PoolGuard(backend, 5, 60, "test", clock)
    guard.failed("test", RuntimeError("simulated outage"))
    assert load_blocks(backend, guard, layout, _keys(3), [1, 2, 3], 2) == [1, 2, 3]
    assert save_blocks(backend, guard, layout, _keys(3), [1, 2, 3], 2) == (0, {0: 3})
    assert guard.skipped == {"load": 2, "save": 2}  # one per batch


def test_threads_run_tasks_report_completion_and_drain_on_stop(backend: MooncakeBackend) -> None:
    src, dst = torch.randn(2, NUM_BLOCKS, 32, 64), _cache()
    guard = PoolGuard(backend, 5, 60, "test")
    saved: list[tuple[str, int, dict[int, int]]] = []
    loaded: list[tuple[str, int, list[int]]] = []
    done = threading.Event()
    sender = KVCacheStoreSendingThread(
        backend,
        guard,
        KVCacheLayout([src], NUM_BLOCKS),
        4,
        8,
        lambda t, n, f: saved.append((t.req_id, n, f)),
    )
    recver = KVCacheStoreRecvingThread(
        backend,
        guard,
        KVCacheLayout([dst], NUM_BLOCKS),
        4,
        8,
        lambda t, n, f: (loaded.append((t.req_id, n, f)), done.set()),
    )
    sender.start()
    recver.start()
    keys = _keys(4)
    assert sender.submit(TransferTask("r1", keys[:2], [0, 1]))
    assert sender.submit(TransferTask("r2", keys[2:], [2, 3]))
    assert sender.stop(30)  # drains both tasks before stopping
    assert [s[0] for s in saved] == ["r1", "r2"] and all(s[1] == 2 for s in saved)
    assert not sender.submit(TransferTask("r3", keys, [0, 1, 2, 3]))  # stopped
    assert recver.submit(TransferTask("r1", [*keys, "xfer/none"], [4, 5, 6, 7, 8]))
    assert done.wait(30)
    assert loaded == [("r1", 5, [8])]
    assert torch.equal(dst[:, 4:8], src[:, 0:4])
    # A task that raises inside the thread is reported as failed, and the thread lives on.
    done.clear()
    assert recver.submit(TransferTask("bad", keys[:1], [NUM_BLOCKS + 3]))
    assert done.wait(30)
    assert loaded[-1] == ("bad", 1, [NUM_BLOCKS + 3])
    assert recver.stop(30)


def test_a_full_queue_refuses_tasks(backend: MooncakeBackend) -> None:
    layout = KVCacheLayout([_cache()], NUM_BLOCKS)
    sender = KVCacheStoreSendingThread(
        backend, PoolGuard(backend, 5, 60, "test"), layout, 2, 8, lambda *a: None
    )
    # Not started: nothing consumes the queue.
    assert sender.submit(TransferTask("a", _keys(1), [0]))
    assert sender.submit(TransferTask("b", _keys(1), [1]))
    assert not sender.submit(TransferTask("c", _keys(1), [2]))
    started = time.monotonic()
    assert sender.stop(0.2)  # never started: nothing to join
    assert time.monotonic() - started < 1
