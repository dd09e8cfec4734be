"""Benchmark of `block_copy.BlockCopier` against a contiguous copy of the same bytes.

Run (the subsystem venv):

    python benchmarks/bench_block_copy.py            # hot caches, 15 repetitions
    python benchmarks/bench_block_copy.py --cold     # evict the caches before every sample
    python benchmarks/bench_block_copy.py --quick
    python benchmarks/bench_block_copy.py --json benchmarks/results/block_copy_hot.json

`--json PATH` writes the rows of the printed table (ratios as fractions, 1.0 = 100%) with the
settings of the run, for `plot_connectors.py`.

A KV cache as vLLM allocates it (all layers in one buffer, one view per layer, vLLM's CPU layout
`[num_blocks, heads, block_size, head_dim]`, bf16), stacked by `stack_layers`, and a host pool
made by `host_mirror`. Per geometry (bytes per block over all layers, layers), number of blocks
N and id pattern (`contiguous`: one run on both sides; `scattered`: random ids on both sides),
three things move the same N x block bytes:

- baseline: ONE `torch` copy between two contiguous tensors of N x block bytes (`copy_`), and
  ONE `ctypes.memmove` of the same bytes;
- `memmove` path: `BlockCopier(...).copy`, the path of CPU tensors (save: KV cache -> host):
  the compiled loop of `block_copy_cpu` (`_block_memmove.c`);
- `memoryview` path: the same with the extension switched off (`block_copy_cpu.EXTENSION =
  None`), the pure Python fallback of an install without a C compiler;
- `torch` path: the same with `force_torch=True`, the path an NPU/GPU KV cache takes
  (`_foreach_copy_` of strided slices), measured here on the CPU.

Figures are the baseline's time / the path's time (100% = as fast as one contiguous copy), for
the median of interleaved repetitions, in wall time and in process CPU time: the machine is
shared, and CPU time does not count waiting for a core. The copy runs on one thread (vLLM's CPU
worker serves with one torch thread).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

from run_info import run_info  # noqa: E402

from vllm_ascend.distributed.kv_transfer.utils import block_copy_cpu  # noqa: E402
from vllm_ascend.distributed.kv_transfer.utils.block_copy import (  # noqa: E402
    BlockCopier,
    BlockTensor,
    host_mirror,
    stack_layers,
)

# (bytes per block over all layers, layers): 8-16 KiB is the tiny e2e model (2 layers of
# 32 tokens x 1 KV head x 64 head_dim x K/V), 4 MiB a 32-layer 8-KV-head 128-dim model.
GEOMETRIES = [
    (8 << 10, 2),
    (16 << 10, 2),
    (64 << 10, 4),
    (256 << 10, 8),
    (1 << 20, 32),
    (4 << 20, 32),
]
COUNTS = [1, 16, 128, 1024]
# Bound on one side's bytes per batch, so that the largest geometries fit the shared machine.
MAX_BATCH_BYTES = 1 << 30
EVICT = torch.empty(0, dtype=torch.uint8)


def median_times(
    fns: list[Callable[[], object]], repeats: int, cold: bool
) -> tuple[list[float], list[float]]:
    """Median wall and process CPU time of each function, interleaved (A, B, C, A, ...).

    Hot (`cold` False): each timed call directly follows an untimed call of the same function,
    so every function finds its own bytes in the caches as far as they fit; otherwise a path
    measured right after another path over the same blocks would inherit that path's cache
    state and the baseline (other buffers) would not.
    """
    for fn in fns:
        fn()  # warm-up: page faults, planning caches
    wall: list[list[float]] = [[] for _ in fns]
    cpu: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            if cold:
                EVICT.add_(1)  # 64 MiB, twice the last-level cache
            else:
                fn()
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[i].append(time.perf_counter() - w0)
            cpu[i].append(time.process_time() - c0)
    return [statistics.median(w) for w in wall], [statistics.median(c) for c in cpu]


def kv_cache(block_bytes: int, layers: int, num_blocks: int) -> list[torch.Tensor]:
    per_block_layer = block_bytes // layers // 2  # bf16 elements
    head_dim = 64
    shape = (num_blocks, per_block_layer // (32 * head_dim), 32, head_dim)
    buf = torch.ones(num_blocks * per_block_layer * layers, dtype=torch.bfloat16)
    per_layer = num_blocks * per_block_layer
    return [buf[i * per_layer : (i + 1) * per_layer].view(shape) for i in range(layers)]


def bench_geometry(
    block_bytes: int, layers: int, counts: list[int], repeats: int, cold: bool
) -> list[dict[str, object]]:
    counts = [n for n in counts if n * block_bytes <= MAX_BATCH_BYTES]
    top = max(counts)
    num_blocks, num_host = top + top // 4 + 1, top + 1
    device = stack_layers(kv_cache(block_bytes, layers, num_blocks), num_blocks)
    host = [host_mirror(d, num_host, lambda s, t: torch.ones(tuple(s), dtype=t)) for d in device]
    pairs = list(zip(device, host, strict=True))
    fast, fallback = BlockCopier(pairs), python_copier(pairs)
    slow = BlockCopier(pairs, force_torch=True)
    assert fast.mechanism == "memmove", "the _block_memmove extension is not built"
    assert fallback.mechanism == "memoryview" and slow.mechanism == "torch"
    raw_src = torch.ones(top * block_bytes, dtype=torch.uint8)
    raw_dst = torch.ones(top * block_bytes, dtype=torch.uint8)
    rng = random.Random(block_bytes)
    rows: list[dict[str, object]] = []
    for n in counts:
        nbytes = n * block_bytes
        src, dst = raw_src[:nbytes], raw_dst[:nbytes]
        sp, dp = src.data_ptr(), dst.data_ptr()
        for pattern in ("contiguous", "scattered"):
            if pattern == "contiguous":
                first = rng.randrange(0, num_blocks - n + 1)
                dev, hst = list(range(first, first + n)), list(range(n))
            else:
                dev, hst = rng.sample(range(num_blocks), n), rng.sample(range(num_host), n)
            fns: list[Callable[[], object]] = [
                partial(dst.copy_, src),
                partial(ctypes.memmove, dp, sp, nbytes),
                partial(fast.copy, dev, hst),
                partial(slow.copy, dev, hst),
                partial(fallback.copy, dev, hst),
            ]
            wall, cpu = median_times(fns, repeats, cold)
            rows.append(
                {
                    "block": block_bytes,
                    "layers": layers,
                    "blocks": n,
                    "pattern": pattern,
                    "raw_gbps": nbytes / wall[0] / 1e9,
                    "memmove_wall": wall[0] / wall[2],
                    "memmove_cpu": cpu[0] / cpu[2],
                    "memmove_vs_memmove": cpu[1] / cpu[2],
                    "torch_wall": wall[0] / wall[3],
                    "torch_cpu": cpu[0] / cpu[3],
                    "memoryview_cpu": cpu[0] / cpu[4],
                    "memmove_us": cpu[2] * 1e6,
                    "raw_us": cpu[0] * 1e6,
                }
            )
    return rows


def python_copier(pairs: list[tuple[BlockTensor, BlockTensor]]) -> BlockCopier:
    """A `BlockCopier` on the memoryview fallback, as an install without the extension has."""
    compiled, block_copy_cpu.EXTENSION = block_copy_cpu.EXTENSION, None
    try:
        return BlockCopier(pairs)
    finally:
        block_copy_cpu.EXTENSION = compiled


HEADER = (
    "| block | layers | blocks | ids | contiguous torch copy GB/s (us CPU) "
    "| memmove path: % of torch copy (wall / CPU) | % of one memmove (CPU) "
    "| memoryview fallback: % of torch copy (CPU) | torch path: % of torch copy (wall / CPU) |"
    "\n|---:|---:|---:|---|---:|---:|---:|---:|---:|"
)


def size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def main() -> int:
    global EVICT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 repetitions instead of 15")
    parser.add_argument("--cold", action="store_true", help="evict caches before each sample")
    parser.add_argument("--json", type=Path, help="also write the rows and settings here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.cold:
        EVICT = torch.ones(64 << 20, dtype=torch.uint8)
    repeats = 5 if args.quick else 15
    info = run_info("torch")
    caches = "cold" if args.cold else "hot"
    print(f"torch {torch.__version__}, 1 thread, {caches} caches, ")
    print(f"medians of {repeats}, load average {os.getloadavg()[0]:.1f}\n")
    print(HEADER)
    rows: list[dict[str, object]] = []
    for block_bytes, layers in GEOMETRIES:
        for r in bench_geometry(block_bytes, layers, COUNTS, repeats, args.cold):
            rows.append(r)
            print(
                f"| {size(block_bytes)} | {layers} | {r['blocks']} | {r['pattern']} "
                f"| {r['raw_gbps']:.1f} ({r['raw_us']:.0f}) "
                f"| {r['memmove_wall']:.0%} / {r['memmove_cpu']:.0%} "
                f"| {r['memmove_vs_memmove']:.0%} "
                f"| {r['memoryview_cpu']:.0%} "
                f"| {r['torch_wall']:.0%} / {r['torch_cpu']:.0%} |",
                flush=True,
            )
    if args.json:
        info["load_average_1m"].append(os.getloadavg()[0])
        settings = {"caches": caches, "repeats": repeats, "statistic": "median", "threads": 1}
        settings["ratios"] = "baseline time / path time (1.0 = as fast as one contiguous copy)"
        result = {**info, "settings": settings, "rows": rows}
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
