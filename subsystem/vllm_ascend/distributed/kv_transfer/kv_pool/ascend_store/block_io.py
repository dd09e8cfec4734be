"""`load_blocks` / `save_blocks`: batched store calls for a list of KV cache blocks."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import (
    Backend,
    BackendError,
)

if TYPE_CHECKING:
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.block_layout import (
        KVCacheLayout,
    )
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_guard import PoolGuard

__all__ = ["load_blocks", "save_blocks"]


def _batches(n: int, size: int) -> list[tuple[int, int]]:
    return [(i, min(i + size, n)) for i in range(0, n, size)]


def load_blocks(
    backend: Backend,
    guard: PoolGuard,
    layout: KVCacheLayout,
    keys: Sequence[str],
    block_ids: Sequence[int],
    batch_keys: int,
    *,
    deadline: float | None = None,
) -> list[int]:
    """Read `keys[i]` into KV cache block `block_ids[i]`, in batches of `batch_keys` keys.

    Args:
        deadline: `time.monotonic()` after which no further batch starts (a batch already in
            the store is not interrupted); None for no deadline.

    Returns:
        The block ids that did not receive their full value (missing key, store error, pool
        bypassed, deadline passed), in input order.
    """
    failed: list[int] = []
    for lo, hi in _batches(len(keys), batch_keys):
        ids = list(block_ids[lo:hi])
        if deadline is not None and time.monotonic() >= deadline:
            failed.extend(ids)
            continue
        if not guard.available("load"):
            failed.extend(ids)
            continue
        segments = [layout.segments(b) for b in ids]
        try:
            results = backend.get(keys[lo:hi], [s[0] for s in segments], [s[1] for s in segments])
        except BackendError as exc:
            guard.failed("load", exc)
            failed.extend(ids)
            continue
        guard.succeeded("load")
        expected = layout.bytes_per_block
        failed.extend(b for b, r in zip(ids, results, strict=True) if r != expected)
    return failed


def save_blocks(
    backend: Backend,
    guard: PoolGuard,
    layout: KVCacheLayout,
    keys: Sequence[str],
    block_ids: Sequence[int],
    batch_keys: int,
) -> tuple[int, dict[int, int]]:
    """Write KV cache block `block_ids[i]` under `keys[i]`, in batches of `batch_keys` keys.

    Returns:
        `(stored, failures)`: keys stored (or already present), and a count of the other
        keys per store code (`0` counts keys skipped because the pool was bypassed or the call
        failed as a whole).
    """
    stored = 0
    failures: dict[int, int] = {}
    for lo, hi in _batches(len(keys), batch_keys):
        n = hi - lo
        if not guard.available("save"):
            failures[0] = failures.get(0, 0) + n
            continue
        segments = [layout.segments(b) for b in block_ids[lo:hi]]
        try:
            results = backend.put(keys[lo:hi], [s[0] for s in segments], [s[1] for s in segments])
        except BackendError as exc:
            guard.failed("save", exc)
            failures[0] = failures.get(0, 0) + n
            continue
        guard.succeeded("save")
        for r in results:
            if r == 0:
                stored += 1
            else:
                failures[r] = failures.get(r, 0) + 1
    return stored, failures
