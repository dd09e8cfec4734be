"""MooncakeBackend against a real mooncake_master on loopback (started here).

Each test uses its own keys; clients close before the master stops (a client whose master is
gone takes seconds to destroy).
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mooncake.store")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from harness import free_port  # noqa: E402
from kvpool_fixtures import module_master  # noqa: E402
from kvpool_master import MooncakeMaster  # noqa: E402

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import (  # noqa: E402
    BackendError,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.mooncake_backend import (  # noqa: E402
    MooncakeBackend,
)

MIB = 1 << 20


master = module_master()


@pytest.fixture(scope="module")
def worker(master: MooncakeMaster) -> Iterator[MooncakeBackend]:
    backend = MooncakeBackend(None, master.store_config(global_segment_size="64MB"))
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def lookup(master: MooncakeMaster) -> Iterator[MooncakeBackend]:
    backend = MooncakeBackend(None, master.store_config(), lookup_only=True)
    yield backend
    backend.close()


def keys(n: int) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    return [f"test/{tag}/{i}" for i in range(n)]


def test_single_segment_round_trip(worker: MooncakeBackend, lookup: MooncakeBackend) -> None:
    src = torch.arange(8 * 4096, dtype=torch.int32).view(8, 4096)  # 8 blocks of 16 KiB
    dst = torch.zeros_like(src)
    worker.register_buffer([src.data_ptr(), dst.data_ptr()], [src.nbytes, dst.nbytes])
    ks = keys(8)
    size = src[0].nbytes
    assert worker.put(ks, [[src[i].data_ptr()] for i in range(8)], [[size]] * 8) == [0] * 8
    # The scheduler's lookup-only client (no memory of its own) sees them.
    assert lookup.exists([*ks, "test/absent"]) == [1] * 8 + [0]
    order = [3, 0, 7]
    got = worker.get([ks[i] for i in order], [[dst[j].data_ptr()] for j in range(3)], [[size]] * 3)
    assert got == [size] * 3
    for j, i in enumerate(order):
        assert torch.equal(dst[j], src[i])


def test_multi_segment_values_concatenate_in_order(worker: MooncakeBackend) -> None:
    # K and V halves of 4 blocks, as in a [2, num_blocks, ...] layer.
    layer = torch.randn(2, 4, 256)
    out = torch.zeros_like(layer)
    ks = keys(4)
    seg = layer[0, 0].nbytes
    addrs = [[layer[0, b].data_ptr(), layer[1, b].data_ptr()] for b in range(4)]
    assert worker.put(ks, addrs, [[seg, seg]] * 4) == [0] * 4
    out_addrs = [[out[0, b].data_ptr(), out[1, b].data_ptr()] for b in range(4)]
    assert worker.get(ks, out_addrs, [[seg, seg]] * 4) == [2 * seg] * 4
    assert torch.equal(out, layer)
    # The value is the concatenation: one buffer of twice the size reads it whole.
    flat = torch.zeros(2, 256)
    assert worker.get(ks[:1], [[flat.data_ptr()]], [[2 * seg]]) == [2 * seg]
    assert torch.equal(flat[0], layer[0, 0]) and torch.equal(flat[1], layer[1, 0])


def test_per_key_codes_not_exceptions(worker: MooncakeBackend) -> None:
    buf = torch.ones(1024, dtype=torch.uint8)
    small = torch.zeros(16, dtype=torch.uint8)
    (k,) = keys(1)
    assert worker.put([k], [[buf.data_ptr()]], [[1024]]) == [0]
    # A second put keeps the first value (Mooncake never overwrites) and still reports 0.
    other = torch.full((1024,), 7, dtype=torch.uint8)
    assert worker.put([k], [[other.data_ptr()]], [[1024]]) == [0]
    out = torch.zeros(1024, dtype=torch.uint8)
    assert worker.get([k], [[out.data_ptr()]], [[1024]]) == [1024]
    assert torch.equal(out, buf)
    missing, too_small = worker.get(
        ["test/missing", k], [[out.data_ptr()], [small.data_ptr()]], [[1024], [16]]
    )
    assert missing == -704 and too_small == -600
    with pytest.raises(ValueError, match="1 keys but 2 address lists"):
        worker.put([k], [[1], [2]], [[1], [1]])
    assert worker.remove([k, "test/missing"]) == [0, -704]
    assert worker.exists([k]) == [0]


def test_register_buffer_errors_are_raised(master: MooncakeMaster) -> None:
    # A client of its own: registrations are per client, and freed tensors of other tests
    # may still be registered with the shared one.
    backend = MooncakeBackend(None, master.store_config(global_segment_size=0))
    try:
        t = torch.zeros(4096, dtype=torch.uint8)
        backend.register_buffer([t.data_ptr()], [t.nbytes])
        with pytest.raises(BackendError, match="register_buffer.*INVALID_PARAMS"):
            backend.register_buffer([t.data_ptr()], [t.nbytes])  # overlaps itself
        with pytest.raises(ValueError):
            backend.register_buffer([t.data_ptr()], [0])
    finally:
        backend.close()


def test_a_closed_master_port_fails_fast_naming_the_address() -> None:
    port = free_port()
    started = time.monotonic()
    with pytest.raises(BackendError) as info:
        MooncakeBackend(None, {"master_server_address": f"127.0.0.1:{port}"})
    assert time.monotonic() - started < 10  # Mooncake's own setup retries for ~90 s
    assert f"master_server_address=127.0.0.1:{port}: cannot connect" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_segment_beyond_host_memory_fails_fast(master: MooncakeMaster) -> None:
    with pytest.raises(ValueError) as info:
        MooncakeBackend(None, master.store_config(global_segment_size="64TB"))
    message = str(info.value)
    assert "global_segment_size=70368744177664 bytes" in message
    assert master.address in message


def test_pool_full_is_a_per_key_code_and_the_store_evicts(tmp_path: Path) -> None:
    # A pool of one 16 MiB segment and 1 MiB values: puts beyond it fail with -200 (pool
    # full), never raise, and the master evicts in the background so later puts succeed.
    m = MooncakeMaster(tmp_path).start()
    backend = MooncakeBackend(None, m.store_config(global_segment_size="16MB"))
    try:
        value = torch.zeros(MIB, dtype=torch.uint8)
        results: list[int] = []
        for k in keys(40):
            results += backend.put([k], [[value.data_ptr()]], [[MIB]])
        assert set(results) <= {0, -200}
        assert results.count(-200) > 0
        deadline = time.monotonic() + 10
        while backend.put(keys(1), [[value.data_ptr()]], [[MIB]]) != [0]:
            assert time.monotonic() < deadline, "the store never made room"
            time.sleep(0.05)
        assert m.key_count() <= 16
    finally:
        backend.close()
        m.stop()


def test_dead_master_raises_and_is_unreachable_then_recovers(tmp_path: Path) -> None:
    m = MooncakeMaster(tmp_path).start()
    backend = MooncakeBackend(None, m.store_config(global_segment_size="16MB"), lookup_only=False)
    try:
        assert backend.is_reachable()
        m.kill()
        started = time.monotonic()
        assert not backend.is_reachable()
        assert time.monotonic() - started < 1.0  # a refused connect, not a store timeout
        with pytest.raises(BackendError, match=f"master {m.address}"):
            backend.exists(keys(3))
        m.start()
        assert backend.is_reachable()
        m.wait_capacity(16 * MIB, timeout_s=60)  # the client remounts its segment by itself
        deadline = time.monotonic() + 30
        while True:
            try:
                assert backend.exists(keys(2)) == [0, 0]
                break
            except BackendError:
                assert time.monotonic() < deadline
                time.sleep(0.5)
    finally:
        backend.close()
        m.stop()
