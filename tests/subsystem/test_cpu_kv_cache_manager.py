"""CPUKVCacheManager: lookup, pins, LRU eviction, store acknowledgements (pure Python)."""

from __future__ import annotations

import pytest

from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.cpu_kv_cache_manager import (
    CPUKVCacheManager,
)


def h(*names: str) -> list[bytes]:
    return [n.encode() for n in names]


def store(m: CPUKVCacheManager, hashes: list[bytes], ranks: range = range(1)) -> list[int]:
    """Allocate and acknowledge from every rank; returns the host ids allocated."""
    allocated = m.allocate(hashes)
    ids = [block_id for _, block_id in allocated]
    for rank in ranks:
        m.complete(ids, rank)
    return ids


def test_fresh_allocations_are_contiguous_ascending() -> None:
    m = CPUKVCacheManager(8)
    assert m.allocate(h("a", "b", "c")) == [(0, 0), (1, 1), (2, 2)]


def test_lookup_counts_leading_ready_blocks_only() -> None:
    m = CPUKVCacheManager(8)
    store(m, h("a", "b"))
    m.allocate(h("c"))  # pending: not offered to lookups
    assert m.lookup(h("a", "b", "c")) == 2
    assert m.lookup(h("b")) == 1
    assert m.lookup(h("x", "a")) == 0
    assert m.lookup([]) == 0


def test_block_is_ready_only_after_every_rank_acknowledged() -> None:
    m = CPUKVCacheManager(4, world_size=2)
    ids = [i for _, i in m.allocate(h("a"))]
    m.complete(ids, rank=0)
    assert m.lookup(h("a")) == 0
    m.complete(ids, rank=0)  # a duplicate ack from the same rank does not count twice
    assert m.lookup(h("a")) == 0
    m.complete(ids, rank=1)
    assert m.lookup(h("a")) == 1
    assert m.stats().stored_blocks == 1


def test_failed_store_frees_the_block() -> None:
    m = CPUKVCacheManager(2)
    ids = [i for _, i in m.allocate(h("a", "b"))]
    m.complete(ids[:1], rank=0, ok=False)
    m.complete(ids[1:], rank=0)
    s = m.stats()
    assert (s.free_blocks, s.ready_blocks, s.store_failed_blocks) == (1, 1, 1)
    assert m.lookup(h("a")) == 0


def test_present_hashes_are_not_stored_again() -> None:
    m = CPUKVCacheManager(4)
    store(m, h("a"))
    m.allocate(h("b"))  # pending
    assert m.allocate(h("a", "b", "c")) == [(2, 2)]


def test_lru_eviction_order_follows_use() -> None:
    m = CPUKVCacheManager(3)
    store(m, h("a"))
    store(m, h("b"))
    store(m, h("c"))
    # Using "a" (acquire ... release) makes it the most recently used.
    assert m.acquire("req", h("a")) == [0]
    m.release("req")
    store(m, h("d"))  # evicts "b", the least recently used
    assert [m.contains(x) for x in h("a", "b", "c", "d")] == [True, False, True, True]
    assert m.stats().evicted_blocks == 1


def test_lookup_does_not_change_lru_order() -> None:
    m = CPUKVCacheManager(2)
    store(m, h("a"))
    store(m, h("b"))
    assert m.lookup(h("a")) == 1  # side-effect free, as vLLM requires
    store(m, h("c"))
    assert not m.contains(b"a") and m.contains(b"b")


def test_pinned_and_pending_blocks_are_never_evicted() -> None:
    m = CPUKVCacheManager(3)
    store(m, h("a"))
    m.acquire("r1", h("a"))  # pinned
    m.allocate(h("p1", "p2"))  # pending, an in-flight store batch
    # Nothing is evictable: the allocation is skipped, nothing is lost.
    assert m.allocate(h("x", "y")) == []
    assert m.stats().store_skipped_blocks == 2
    assert m.contains(b"a")
    assert m.stats().pending_blocks == 2
    m.release("r1")
    assert m.allocate(h("x")) == [(0, 0)]  # now "a" can go
    assert not m.contains(b"a")


def test_allocation_stops_at_first_block_without_room() -> None:
    m = CPUKVCacheManager(2)
    m.allocate(h("p"))  # pending
    got = m.allocate(h("a", "b", "c"))
    assert got == [(0, 1)]  # "b" and "c" skipped: a block after a gap is useless
    assert m.stats().store_skipped_blocks == 2


def test_acquire_stops_at_missing_block_and_reports_prefix() -> None:
    m = CPUKVCacheManager(4)
    store(m, h("a", "b", "c"))
    assert m.discard(h("b")) == 1
    assert m.acquire("r", h("a", "b", "c")) == [0]
    assert m.stats().pinned_blocks == 1
    assert m.release("r") == 1
    assert m.release("r") == 0


def test_reset_keeps_pinned_and_pending() -> None:
    m = CPUKVCacheManager(4)
    store(m, h("a", "b"))
    m.acquire("r", h("a"))
    m.allocate(h("p"))
    assert m.reset() == 1
    assert m.contains(b"a") and not m.contains(b"b")
    s = m.stats()
    assert (s.ready_blocks, s.pending_blocks, s.free_blocks) == (1, 1, 2)


def test_occupancy_returns_to_baseline() -> None:
    m = CPUKVCacheManager(4, world_size=2)
    for i in range(10):
        ids = [b for _, b in m.allocate([f"x{i}".encode(), f"y{i}".encode()])]
        m.complete(ids, 0)
        m.complete(ids, 1)
        m.acquire(f"r{i}", [f"x{i}".encode()])
        m.release(f"r{i}")
    s = m.stats()
    assert s.pending_blocks == 0 and s.pinned_blocks == 0
    assert s.ready_blocks + s.free_blocks == 4


@pytest.mark.parametrize("kwargs", [{"num_blocks": 0}, {"num_blocks": 2, "world_size": 0}])
def test_rejects_bad_sizes(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        CPUKVCacheManager(**kwargs)


def test_complete_validates_rank_and_ids() -> None:
    m = CPUKVCacheManager(2, world_size=1)
    with pytest.raises(ValueError, match="rank 1"):
        m.complete([0], rank=1)
    with pytest.raises(ValueError, match="host block id 5"):
        m.complete([5], rank=0)


def test_lookup_of_a_long_prompt() -> None:
    # The cost per request vs. prompt length is measured in benchmarks/bench_cpu_offload.py.
    m = CPUKVCacheManager(4096)
    hashes = [i.to_bytes(8, "little") for i in range(4096)]
    store(m, hashes)
    assert m.lookup(hashes) == 4096
