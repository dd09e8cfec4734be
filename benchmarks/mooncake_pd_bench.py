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
disaggregated pair (prefill with `max_tokens=1`, then decode), uniproc vLLM CPU engines; the
decode side with and without its idle-step wait (`IDLE_STEP_WAIT_S`, set through a
benchmark-only call into the decode engine), with its step count.

Usage:
    python benchmarks/mooncake_pd_bench.py transfer [--blocks 64 128 256] [--repeats 7]
    python benchmarks/mooncake_pd_bench.py ttft [--repeats 5]
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
import tempfile
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

    from vllm_ascend.distributed.kv_transfer.kv_p2p.worker import MooncakeConnectorWorker

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


def engine_set_idle_wait(llm: Any, seconds: float) -> None:
    """Benchmark-only, run in the decode engine: set how long `get_finished` waits for a read
    in flight on a step without a forward pass (0: the behaviour before that wait existed)."""
    from vllm_ascend.distributed.kv_transfer.kv_p2p import worker

    worker.IDLE_STEP_WAIT_S = seconds


def engine_take_steps(llm: Any) -> int:
    """Benchmark-only, run in the decode engine: worker steps (`get_finished` calls) since the
    last call, counted by wrapping the worker's method."""
    from vllm.distributed.kv_transfer import get_kv_transfer_group

    worker = get_kv_transfer_group().worker
    if not hasattr(worker, "bench_steps"):
        inner = worker.get_finished

        def counted() -> Any:
            worker.bench_steps += 1
            return inner()

        worker.bench_steps = 0
        worker.get_finished = counted
    steps, worker.bench_steps = worker.bench_steps, 0
    return int(steps)


def bench_ttft(repeats: int, prompt_tokens: int) -> dict[str, Any]:
    """Per repetition, fresh prompts (no prefix-cache hit anywhere): one on the single engine,
    and one P/D pair per decode variant (`idle_wait`: the shipped `IDLE_STEP_WAIT_S`;
    `no_idle_wait`: 0), the two variants alternating which runs first."""
    sys.path.insert(0, str(REPO / "tests" / "e2e"))
    from harness import UNIPROC_LLM_KWARGS, EngineProcess, free_port, token_prompts
    from mooncake_pd import MOONCAKE_ENV, decode, pd_config, prefill
    from tiny_model import build_tiny_llama

    from vllm_ascend.distributed.kv_transfer.kv_p2p.worker import IDLE_STEP_WAIT_S

    here = str(Path(__file__).resolve())
    model = build_tiny_llama(Path(tempfile.mkdtemp(prefix="vam-bench-model-")))
    kwargs = {**UNIPROC_LLM_KWARGS, "max_model_len": prompt_tokens + 64}
    single = EngineProcess(model, llm_kwargs=kwargs, env=MOONCAKE_ENV).start()
    producer = EngineProcess(
        model,
        kv_transfer_config=pd_config("kv_producer", free_port()),
        llm_kwargs=kwargs,
        env=MOONCAKE_ENV,
    ).start()
    consumer = EngineProcess(
        model,
        kv_transfer_config=pd_config("kv_consumer", free_port()),
        llm_kwargs=kwargs,
        env=MOONCAKE_ENV,
    ).start()
    variants = {"idle_wait": IDLE_STEP_WAIT_S, "no_idle_wait": 0.0}
    samples: dict[str, list[float]] = {"single": []}
    for name in variants:
        samples.update({f"{name}_prefill": [], f"{name}_decode": [], f"{name}_steps": []})
    try:
        consumer.call(f"{here}:engine_take_steps")  # installs the counter
        seed = 1000
        for rep in range(repeats + 1):  # the first repetition warms up
            seed += 1
            prompt = token_prompts(1, prompt_tokens, seed=seed)
            started = time.perf_counter()
            single.generate(prompt_token_ids=prompt, max_tokens=1)
            single_time = time.perf_counter() - started
            if rep:
                samples["single"].append(single_time)
            order = list(variants) if rep % 2 else list(reversed(variants))
            for name in order:
                seed += 1
                prompt = token_prompts(1, prompt_tokens, seed=seed)
                consumer.call(f"{here}:engine_set_idle_wait", seconds=variants[name])
                started = time.perf_counter()
                params = prefill(producer, prompt)
                prefill_time = time.perf_counter() - started
                consumer.call(f"{here}:engine_take_steps")
                started = time.perf_counter()
                decode(consumer, prompt, list(params), max_tokens=1)
                decode_time = time.perf_counter() - started
                steps = consumer.call(f"{here}:engine_take_steps")
                if rep:
                    samples[f"{name}_prefill"].append(prefill_time)
                    samples[f"{name}_decode"].append(decode_time)
                    samples[f"{name}_steps"].append(steps)
        result: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "repeats": repeats,
            "single_ttft_s": statistics.median(samples["single"]),
        }
        for name in variants:
            pd = [
                p + d
                for p, d in zip(samples[f"{name}_prefill"], samples[f"{name}_decode"], strict=True)
            ]
            result[name] = {
                "pd_ttft_s": statistics.median(pd),
                "pd_prefill_s": statistics.median(samples[f"{name}_prefill"]),
                "pd_decode_first_token_s": statistics.median(samples[f"{name}_decode"]),
                "decode_steps": statistics.median(samples[f"{name}_steps"]),
                "pd_over_single": statistics.median(pd) / result["single_ttft_s"],
            }
        result["samples"] = samples
        return result
    finally:
        for engine in (consumer, producer, single):
            engine.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("transfer")
    t.add_argument("--blocks", type=int, nargs="+", default=[64, 128, 256])
    t.add_argument("--repeats", type=int, default=9)
    f = sub.add_parser("ttft")
    f.add_argument("--repeats", type=int, default=5)
    f.add_argument("--prompt-tokens", type=int, default=1024)
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
    else:
        print(json.dumps(bench_ttft(args.repeats, args.prompt_tokens), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
