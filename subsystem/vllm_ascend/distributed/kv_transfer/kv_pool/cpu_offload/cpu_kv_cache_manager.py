"""The CPU KV cache manager: which host block holds which KV cache block hash.

It owns a pool of `num_blocks` host block ids and maps vLLM block hashes (from prefix caching,
`Request.block_hashes`) to them. A host block is in one of three states:

- *pending*: allocated for a store that workers have not finished; never evicted, never
  offered to lookups;
- *ready*: stored by every worker (`world_size` acknowledgements); offered to lookups and
  evictable in LRU order while no request holds it;
- *pinned*: ready and held by one or more requests that are loading it (`acquire` ... `release`).

Costs are per block, never per token: a lookup walks the request's block hashes until the first
miss, so it is linear in the number of blocks of the prompt.

Not thread-safe by design: the metadata server's single thread owns the manager.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["CPUKVCacheManager", "ManagerStats"]

BlockHash = bytes


@dataclass
class _Entry:
    block_id: int
    ready: bool = False
    acks: set[int] = field(default_factory=set)
    pins: int = 0


@dataclass
class ManagerStats:
    """Counters since start (monotonic) and the current occupancy (gauges)."""

    lookups: int = 0
    lookup_hit_blocks: int = 0
    acquired_blocks: int = 0
    allocated_blocks: int = 0
    stored_blocks: int = 0
    store_failed_blocks: int = 0
    store_skipped_blocks: int = 0
    evicted_blocks: int = 0
    reset_blocks: int = 0
    # gauges, filled in by `CPUKVCacheManager.stats()`
    num_blocks: int = 0
    free_blocks: int = 0
    ready_blocks: int = 0
    pending_blocks: int = 0
    pinned_blocks: int = 0


class CPUKVCacheManager:
    """Host block pool with LRU eviction, keyed by KV cache block hash.

    Args:
        num_blocks: host blocks in the pool (> 0).
        world_size: workers that must acknowledge a store before its block is ready (> 0).

    Raises:
        ValueError: a non-positive argument.
    """

    def __init__(self, num_blocks: int, world_size: int = 1) -> None:
        if num_blocks <= 0:
            raise ValueError(f"num_blocks must be positive, got {num_blocks}")
        if world_size <= 0:
            raise ValueError(f"world_size must be positive, got {world_size}")
        self.num_blocks = num_blocks
        self.world_size = world_size
        self._entries: dict[BlockHash, _Entry] = {}
        self._hash_of: list[BlockHash | None] = [None] * num_blocks
        # Ascending ids popped from the end: fresh allocations come out contiguous, which turns a
        # batch of stores into few large copies.
        self._free: list[int] = list(range(num_blocks - 1, -1, -1))
        # Ready, unpinned blocks; first = least recently used.
        self._evictable: OrderedDict[BlockHash, None] = OrderedDict()
        self._pins_by_owner: dict[str, list[BlockHash]] = {}
        self._stats = ManagerStats()

    # ---- scheduler side -------------------------------------------------------------------

    def lookup(self, block_hashes: Sequence[BlockHash]) -> int:
        """Number of leading `block_hashes` whose blocks are ready. Changes no LRU order."""
        self._stats.lookups += 1
        hits = 0
        for h in block_hashes:
            entry = self._entries.get(h)
            if entry is None or not entry.ready:
                break
            hits += 1
        self._stats.lookup_hit_blocks += hits
        return hits

    def acquire(self, owner: str, block_hashes: Sequence[BlockHash]) -> list[int]:
        """Pin the leading ready blocks of `block_hashes` for `owner` and return their ids.

        Stops at the first hash that is not ready (evicted or reset since the lookup): the
        caller treats the rest as load failures. Pins last until `release(owner)`.
        """
        ids: list[int] = []
        pinned = self._pins_by_owner.setdefault(owner, [])
        for h in block_hashes:
            entry = self._entries.get(h)
            if entry is None or not entry.ready:
                break
            entry.pins += 1
            self._evictable.pop(h, None)
            pinned.append(h)
            ids.append(entry.block_id)
        self._stats.acquired_blocks += len(ids)
        if not pinned:
            del self._pins_by_owner[owner]
        return ids

    def release(self, owner: str) -> int:
        """Drop every pin of `owner`; unpinned ready blocks become the most recently used.

        Returns:
            The number of pins dropped (0 for an unknown owner).
        """
        hashes = self._pins_by_owner.pop(owner, [])
        for h in hashes:
            entry = self._entries[h]
            entry.pins -= 1
            if entry.pins == 0 and entry.ready:
                self._evictable[h] = None
        return len(hashes)

    def allocate(self, block_hashes: Sequence[BlockHash]) -> list[tuple[int, int]]:
        """Reserve host blocks for the hashes not yet in the pool, evicting LRU blocks if full.

        Hashes already present (ready or pending) need no store and are skipped. Allocation
        stops at the first hash that finds no free or evictable block: a block after a gap is
        useless to prefix lookups.

        Returns:
            `(index into block_hashes, host block id)` for each block the workers must store.
        """
        out: list[tuple[int, int]] = []
        for i, h in enumerate(block_hashes):
            if h in self._entries:
                continue
            block_id = self._take_free_block()
            if block_id is None:
                self._stats.store_skipped_blocks += sum(
                    1 for x in block_hashes[i:] if x not in self._entries
                )
                break
            self._entries[h] = _Entry(block_id)
            self._hash_of[block_id] = h
            out.append((i, block_id))
        self._stats.allocated_blocks += len(out)
        return out

    def reset(self) -> int:
        """Forget every ready, unpinned block (vLLM's `reset_cache`); returns how many."""
        dropped = list(self._evictable)
        for h in dropped:
            self._drop(h)
        self._evictable.clear()
        self._stats.reset_blocks += len(dropped)
        return len(dropped)

    # ---- worker side ----------------------------------------------------------------------

    def complete(self, block_ids: Sequence[int], rank: int, ok: bool = True) -> None:
        """Record that worker `rank` finished (or failed) storing `block_ids`.

        A block becomes ready when all `world_size` workers acknowledged it; one failure frees
        it at once. Ids that are not pending (a duplicate acknowledgement) are ignored.

        Raises:
            ValueError: `rank` outside `[0, world_size)` or an id outside the pool.
        """
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} outside [0, {self.world_size})")
        for block_id in block_ids:
            if not 0 <= block_id < self.num_blocks:
                raise ValueError(f"host block id {block_id} outside [0, {self.num_blocks})")
            h = self._hash_of[block_id]
            entry = self._entries.get(h) if h is not None else None
            if entry is None or entry.ready:
                continue
            if not ok:
                self._drop(h)  # type: ignore[arg-type]
                self._stats.store_failed_blocks += 1
                continue
            entry.acks.add(rank)
            if len(entry.acks) == self.world_size:
                entry.ready = True
                entry.acks.clear()
                self._evictable[h] = None  # type: ignore[index]
                self._stats.stored_blocks += 1

    # ---- introspection --------------------------------------------------------------------

    @property
    def counters(self) -> ManagerStats:
        """The live counters (gauges not filled in); cheap, for per-call deltas."""
        return self._stats

    def stats(self) -> ManagerStats:
        """A snapshot of the counters and the current occupancy."""
        s = ManagerStats(**vars(self._stats))
        s.num_blocks = self.num_blocks
        s.free_blocks = len(self._free)
        s.ready_blocks = sum(1 for e in self._entries.values() if e.ready)
        s.pending_blocks = len(self._entries) - s.ready_blocks
        s.pinned_blocks = sum(1 for e in self._entries.values() if e.pins)
        return s

    def contains(self, block_hash: BlockHash) -> bool:
        """True when `block_hash` is ready in the pool."""
        entry = self._entries.get(block_hash)
        return entry is not None and entry.ready

    def discard(self, block_hashes: Sequence[BlockHash]) -> int:
        """Forget the given ready, unpinned blocks (an operator's invalidation).

        Returns:
            How many were dropped; pinned or pending blocks are kept.
        """
        n = 0
        for h in block_hashes:
            if h in self._evictable:
                del self._evictable[h]
                self._drop(h)
                n += 1
        return n

    # ---- internals ------------------------------------------------------------------------

    def _take_free_block(self) -> int | None:
        if self._free:
            return self._free.pop()
        if not self._evictable:
            return None
        victim, _ = self._evictable.popitem(last=False)
        self._drop(victim)  # puts its id on top of the free stack
        self._stats.evicted_blocks += 1
        return self._free.pop()

    def _drop(self, h: BlockHash) -> None:
        entry = self._entries.pop(h)
        self._hash_of[entry.block_id] = None
        self._free.append(entry.block_id)
