"""Mooncake P/D connector benchmarks (figures go to BENCHMARKS.md, "Mooncake P/D connector").

`transfer`: KV block read throughput between two processes on loopback (Mooncake TCP).
A prefill worker (`MooncakeConnectorWorker`, producer) runs in a child process; this process
runs a decode worker. For each batch size it measures, on the same warm transfer engine and
session:
- raw: one `batch_transfer_sync_read` of the per-(layer, block) entries (Mooncake alone);
- connector: `add_recvs` of one request until `get_finished` reports it (plan, batched read,
  bookkeeping, the transfer thread hand-off and the polling a worker does each step).
Blocks are shuffled on both sides (no coalescing), as in a long-running engine.

`ttft`: time to first token of a 1,024-token prompt on the tiny model: a single engine vs the
disaggregated pair with our connector (with and without its idle-step wait) and with vLLM's own
`MooncakeConnector` (under a benchmark-only CPU patch); lives in `pd_ttft_bench.py`, which
documents it and takes the same arguments after `ttft`.

Usage:
    python benchmarks/mooncake_pd_bench.py transfer [--blocks 64 128 256] [--repeats 7]
    python benchmarks/mooncake_pd_bench.py ttft [--repeats 5] [--json PATH] [--variants ...]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# Realistic block geometry (a 7B/8B GQA model on an NPU): 128-token blocks, 8 KV heads of
# 128 dims, bf16 -> K+V of one block of one layer = 512 KiB. A few layers keep the run short;
# the per-entry size, which decides transfer efficiency, is the real one.
LAYERS = 4
KV_HEADS = 8
BLOCK_TOKENS = 128
WIDTH = 2 * 128  # K and V of one token and head, packed as vLLM's CPU layout does
ENGINE_ID = "bench-prefill"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_config(role: str, kv_port: int) -> Any:
    from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig

    return MooncakeP2PConfig.from_extra_config(
        {"handshake_timeout_s": 30},
        engine_id=ENGINE_ID if role == "kv_producer" else "bench-decode",
        kv_role=role,
        kv_port=kv_port,
        tp_size=1,
        dp_rank=0,
        total_kv_heads=KV_HEADS,
        block_size=BLOCK_TOKENS,
        default_transfer_timeout_s=30.0,
    )


def make_worker(role: str, kv_port: int, num_blocks: int) -> tuple[Any, Any]:
    import torch

    from vllm_ascend.distributed.kv_transfer.kv_p2p.pull_worker import MooncakeConnectorWorker

    cache = torch.zeros(LAYERS, num_blocks, KV_HEADS, BLOCK_TOKENS, WIDTH, dtype=torch.bfloat16)
    if role == "kv_producer":
        # A cheap pattern that differs per block and layer, to check what lands.
        pattern = torch.arange(LAYERS * num_blocks, dtype=torch.float32).view(LAYERS, num_blocks, 1)
        cache.view(LAYERS, num_blocks, -1).copy_(
            pattern.expand(-1, -1, KV_HEADS * BLOCK_TOKENS * WIDTH)
        )
    worker = MooncakeConnectorWorker(make_config(role, kv_port), 0, num_blocks)
    worker.register_kv_caches({f"layers.{i}": cache[i] for i in range(LAYERS)})
    return worker, cache


def peer_main(kv_port: int, num_blocks: int) -> int:
    worker, _ = make_worker("kv_producer", kv_port, num_blocks)
    print(json.dumps({"ready": True}), flush=True)
    sys.stdin.readline()  # until the parent is done
    worker.shutdown()
    return 0


def raw_lists(local: Any, remote: Any, local_ids: list[int], remote_ids: list[int]) -> tuple:
    addrs_l, addrs_r, lengths = [], [], []
    for region in range(len(local.region_bases)):
        for here, there in zip(local_ids, remote_ids, strict=True):
            addrs_l.append(local.region_bases[region] + here * local.block_strides[region])
            addrs_r.append(remote.region_bases[region] + there * remote.block_strides[region])
            lengths.append(local.block_lens[region])
    return addrs_l, addrs_r, lengths


def raw_read(worker: Any, cache: Any, session: str, lists: tuple) -> float:
    """Seconds for one `batch_transfer_sync_read` of `lists` (Mooncake alone)."""
    cache.zero_()
    started = time.perf_counter()
    status = worker.engine.raw.batch_transfer_sync_read(session, *lists)
    elapsed = time.perf_counter() - started
    assert status == 0, status
    return elapsed


def connector_read(worker: Any, cache: Any, request: Any, num_blocks: int) -> float:
    """Seconds from `add_recvs` until `get_finished` reports the request (the read path)."""
    import torch

    cache.zero_()
    started = time.perf_counter()
    worker.add_recvs([request])
    while True:
        _, done = worker.get_finished()
        if done and request.request_id in done:
            break
        time.sleep(0.0002)
    elapsed = time.perf_counter() - started
    assert not worker.get_block_ids_with_load_errors()
    # The prefill's block landed (the pattern value is layer * num_blocks + block).
    want = torch.tensor(float(num_blocks + request.remote.block_ids[0])).to(torch.bfloat16)
    assert bool((cache[1, request.local_block_ids[0]] == want).all())
    return elapsed


def bench_transfer(blocks: list[int], repeats: int) -> list[dict[str, Any]]:
    from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_params import RecvRequest, RemotePrefill
    from vllm_ascend.distributed.kv_transfer.kv_p2p.side_channel import zmq_address

    num_blocks = max(blocks) + 8
    port = free_port()
    env = dict(os.environ, MC_LOG_LEVEL="ERROR", PYTHONPATH=str(REPO))
    peer = subprocess.Popen(
        [sys.executable, __file__, "peer", str(port), str(num_blocks)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert peer.stdout is not None and json.loads(peer.stdout.readline())["ready"]
        worker, cache = make_worker("kv_consumer", free_port(), num_blocks)
        remote = worker.peers.agent(zmq_address("127.0.0.1", port), ENGINE_ID)
        rng = random.Random(0)
        results = []
        for count in blocks:
            raw_s, conn_s = [], []
            for rep in range(repeats + 1):  # the first repetition warms up
                local_ids = rng.sample(range(num_blocks), count)
                remote_ids = rng.sample(range(num_blocks), count)
                lists = raw_lists(worker.agent, remote, local_ids, remote_ids)

                # Alternate the order: page-cache and CPU-frequency effects hit both alike.
                request = RecvRequest(
                    f"r{count}-{rep}",
                    local_ids,
                    RemotePrefill(ENGINE_ID, "p", "127.0.0.1", port, remote_ids, 1),
                )
                if rep % 2:
                    conn = connector_read(worker, cache, request, num_blocks)
                    raw = raw_read(worker, cache, remote.session_id, lists)
                else:
                    raw = raw_read(worker, cache, remote.session_id, lists)
                    conn = connector_read(worker, cache, request, num_blocks)
                if rep:
                    raw_s.append(raw)
                    conn_s.append(conn)
            nbytes = sum(lists[2])
            raw_med, conn_med = statistics.median(raw_s), statistics.median(conn_s)
            results.append(
                {
                    "blocks": count,
                    "entries": len(lists[2]),
                    "bytes": nbytes,
                    "raw_gbps": nbytes / raw_med / 1e9,
                    "connector_gbps": nbytes / conn_med / 1e9,
                    "ratio": raw_med / conn_med,
                }
            )
        worker.shutdown()
        return results
    finally:
        if peer.stdin is not None:
            peer.stdin.close()
        try:
            peer.wait(30)
        except subprocess.TimeoutExpired:
            peer.kill()


def main() -> int:
    if sys.argv[1:2] == ["ttft"]:
        from pd_ttft_bench import main as ttft_main  # this script's folder is on sys.path

        return ttft_main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("transfer")
    t.add_argument("--blocks", type=int, nargs="+", default=[64, 128, 256])
    t.add_argument("--repeats", type=int, default=9)
    sub.add_parser("ttft", help="see pd_ttft_bench.py")
    p = sub.add_parser("peer")
    p.add_argument("port", type=int)
    p.add_argument("num_blocks", type=int)
    args = parser.parse_args()
    if args.cmd == "peer":
        return peer_main(args.port, args.num_blocks)
    os.environ.setdefault("MC_LOG_LEVEL", "ERROR")
    if args.cmd == "transfer":
        print(
            f"block = {KV_HEADS} heads x {BLOCK_TOKENS} tokens x {WIDTH} x bf16 per layer "
            f"({KV_HEADS * BLOCK_TOKENS * WIDTH * 2 // 1024} KiB), {LAYERS} layers"
        )
        print("| blocks | entries | MiB | raw batch read GB/s | connector GB/s | ratio |")
        print("|---|---|---|---|---|---|")
        for r in bench_transfer(args.blocks, args.repeats):
            print(
                f"| {r['blocks']} | {r['entries']} | {r['bytes'] / 2**20:.0f} | "
                f"{r['raw_gbps']:.2f} | {r['connector_gbps']:.2f} | {r['ratio']:.0%} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
