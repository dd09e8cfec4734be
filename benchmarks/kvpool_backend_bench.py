"""KV pool: MooncakeBackend vs raw MooncakeDistributedStore, and the scheduler's lookup cost.

Run: `python benchmarks/kvpool_backend_bench.py [--rounds N]` in an environment with torch and
`mooncake-transfer-engine` (it starts its own `mooncake_master` on loopback).

1. Throughput: the same bytes, from the same registered buffers, through the same client and
   master: `MooncakeBackend.put/get` against the store's own `batch_put_from`/`batch_get_into`
   (one segment per key) and `batch_put_from_multi_buffers`/`batch_get_into_multi_buffers`
   (several segments per key). Puts use fresh keys each round (Mooncake never overwrites, so a
   repeated key would skip the transfer); keys are removed between rounds, outside the timing.
   Rounds alternate raw and backend; the figure is the median.
2. Lookup: how many store round trips and how long the scheduler side needs to answer "how much
   of this prompt is in the pool" (one batched `exists` of every block's key), against one
   `exists` call per block, for prompts of 1 to 512 blocks.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from kvpool_master import MooncakeMaster  # noqa: E402

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.mooncake_backend import (  # noqa: E402
    MooncakeBackend,
)

MIB = 1 << 20


def _time(
    fn: Callable[[list[str]], list[int]], keys: list[str], expect: Callable[[list[int]], bool]
) -> float:
    start = time.perf_counter()
    results = fn(keys)
    elapsed = time.perf_counter() - start
    if not expect(results):
        raise RuntimeError(f"unexpected results {sorted(set(results))}")
    return elapsed


class Buffers:
    """Source and destination memory, allocated and registered once (a region stays
    registered with the client, so per-case tensors could be freed and reused by malloc)."""

    def __init__(self, backend: MooncakeBackend, nbytes: int) -> None:
        self.src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8)
        self.dst = torch.zeros_like(self.src)
        backend.register_buffer(
            [self.src.data_ptr(), self.dst.data_ptr()], [self.src.nbytes, self.dst.nbytes]
        )


def throughput(
    backend: MooncakeBackend,
    buffers: Buffers,
    n_keys: int,
    segments: int,
    seg_bytes: int,
    rounds: int,
) -> dict[str, float]:
    store = backend.store
    value = segments * seg_bytes
    total = n_keys * value
    src = buffers.src[:total].view(n_keys, segments, seg_bytes)
    dst = buffers.dst[:total].view(n_keys, segments, seg_bytes)
    addrs = [[src[k, s].data_ptr() for s in range(segments)] for k in range(n_keys)]
    out_addrs = [[dst[k, s].data_ptr() for s in range(segments)] for k in range(n_keys)]
    sizes = [[seg_bytes] * segments for _ in range(n_keys)]
    cfg = backend._replicate  # the same ReplicateConfig the backend passes

    def raw_put(keys: list[str]) -> list[int]:
        if segments == 1:
            return list(store.batch_put_from(keys, [a[0] for a in addrs], [value] * n_keys, cfg))
        return list(store.batch_put_from_multi_buffers(keys, addrs, sizes, cfg))

    def raw_get(keys: list[str]) -> list[int]:
        if segments == 1:
            return list(store.batch_get_into(keys, [a[0] for a in out_addrs], [value] * n_keys))
        return list(store.batch_get_into_multi_buffers(keys, out_addrs, sizes))

    def backend_put(keys: list[str]) -> list[int]:
        return backend.put(keys, addrs, sizes)

    def backend_get(keys: list[str]) -> list[int]:
        return backend.get(keys, out_addrs, sizes)

    calls = {"raw": (raw_put, raw_get), "backend": (backend_put, backend_get)}
    times: dict[str, list[float]] = {f"{k}_{op}": [] for k in calls for op in ("put", "get")}
    for r in range(rounds):
        # Back to back, alternating which goes first: the machine's load drifts slowly, so a
        # pair sees the same conditions and the per-round ratio cancels most of the noise.
        for kind in ("raw", "backend") if r % 2 == 0 else ("backend", "raw"):
            put, get = calls[kind]
            keys = [f"bench/{uuid.uuid4().hex}/{i}" for i in range(n_keys)]
            times[f"{kind}_put"].append(_time(put, keys, lambda res: all(x == 0 for x in res)))
            dst.zero_()
            times[f"{kind}_get"].append(_time(get, keys, lambda res: all(x == value for x in res)))
            if not torch.equal(dst, src):
                raise RuntimeError("data mismatch")
            store.batch_remove(keys, True)
    out = {k: total / statistics.median(v) / 1e9 for k, v in times.items()}
    for op in ("put", "get"):
        ratios = [b / r for b, r in zip(times[f"backend_{op}"], times[f"raw_{op}"], strict=True)]
        out[f"{op}_overhead_pct"] = (statistics.median(ratios) - 1) * 100
    out["wrapper_us"] = wrapper_cost_us(backend, addrs, sizes)
    return out


class _NoTransfer:
    """A store stand-in that returns at once: isolates the wrapper's own Python work."""

    def __init__(self, n: int, value: int) -> None:
        self.put_result, self.get_result = [0] * n, [value] * n

    def batch_put_from(self, *args: object) -> list[int]:
        return self.put_result

    batch_put_from_multi_buffers = batch_put_from

    def batch_get_into(self, *args: object) -> list[int]:
        return self.get_result

    batch_get_into_multi_buffers = batch_get_into


def wrapper_cost_us(
    backend: MooncakeBackend, addrs: list[list[int]], sizes: list[list[int]]
) -> float:
    """CPU microseconds MooncakeBackend.put + get spend outside the store, per batch."""
    keys = [f"k{i}" for i in range(len(addrs))]
    real = backend._store
    backend._store = _NoTransfer(len(keys), sum(sizes[0]))
    try:
        start = time.process_time()
        for _ in range(200):
            backend.put(keys, addrs, sizes)
            backend.get(keys, addrs, sizes)
        return (time.process_time() - start) / 200 * 1e6
    finally:
        backend._store = real


def lookups(backend: MooncakeBackend, rounds: int) -> list[tuple[int, float, float]]:
    rows = []
    for n in (1, 16, 128, 512):
        keys = [f"model/fp/tp0-pp0/{uuid.uuid4().hex}" for _ in range(n)]
        batched, per_block = [], []
        for _ in range(rounds):
            start = time.perf_counter()
            backend.exists(keys)  # what KVPoolScheduler.lookup sends: one call
            batched.append(time.perf_counter() - start)
            start = time.perf_counter()
            for k in keys:
                backend.exists([k])
            per_block.append(time.perf_counter() - start)
        rows.append((n, statistics.median(batched) * 1e3, statistics.median(per_block) * 1e3))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        master = MooncakeMaster(tmp).start()
        backend = MooncakeBackend(None, master.store_config(global_segment_size="512MB"))
        buffers = Buffers(backend, 128 * MIB)
        try:
            print(
                "| case | raw put GB/s | backend put GB/s | put overhead | raw get GB/s | "
                "backend get GB/s | get overhead | wrapper CPU us (put+get) |"
            )
            print("|---|---|---|---|---|---|---|---|")
            for label, n, segs, seg_bytes in [
                ("64 x 2 MiB, 1 segment", 64, 1, 2 * MIB),
                ("1024 x 16 KiB, 1 segment (tiny-model blocks)", 1024, 1, 16 * 1024),
                ("256 x 4 x 64 KiB, 4 segments (K/V per layer)", 256, 4, 64 * 1024),
            ]:
                g = throughput(backend, buffers, n, segs, seg_bytes, args.rounds)
                print(
                    f"| {label} | {g['raw_put']:.2f} | {g['backend_put']:.2f} | "
                    f"{g['put_overhead_pct']:+.1f}% | {g['raw_get']:.2f} | "
                    f"{g['backend_get']:.2f} | {g['get_overhead_pct']:+.1f}% | "
                    f"{g['wrapper_us']:.0f} |"
                )
            print()
            print(
                "| prompt blocks | store round trips (batched) | batched lookup ms | "
                "one exists per block ms |"
            )
            print("|---|---|---|---|")
            for n, batched_ms, per_block_ms in lookups(backend, args.rounds):
                print(f"| {n} | 1 | {batched_ms:.2f} | {per_block_ms:.2f} |")
        finally:
            backend.close()
            master.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
