"""What the CPU offload worker's `StepDone` costs its step with vLLM's multiprocessing executor.

`vllm serve` on a CPU runs the worker in a process of its own (vLLM's CPU platform switches
the uni executor to `mp`), so the worker's `StepDone` goes over ZMQ to the metadata server's
thread in the engine core process, whose main thread meanwhile waits for the worker's output
in vLLM's shared-memory queue: a loop around `os.sched_yield()` that takes the GIL back after
every yield. This script builds that picture without vLLM: a server process whose main thread
spins like that, and a client process that sends `StepDone` with `call` (waits for the reply:
the behaviour before) and with `send` (does not), alternating; medians of the per-message
wall time seen by the client, in microseconds.

    python benchmarks/offload_stepdone_bench.py [--messages 400]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "subsystem")]

from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.cpu_kv_cache_manager import (  # noqa: E402
    CPUKVCacheManager,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.metadata import (  # noqa: E402
    MetadataClient,
    MetadataServer,
    StepDone,
)


def serve(address: str, stop: mp.Event, ready: mp.Event) -> None:  # type: ignore[valid-type]
    """The engine core's picture: the server thread, and a main thread spinning on
    `os.sched_yield()` (vLLM's `shm_broadcast` wait) until `stop`."""
    server = MetadataServer(address, CPUKVCacheManager(1024), 4096).start()
    ready.set()
    while not stop.is_set():  # type: ignore[attr-defined]
        for _ in range(1000):
            os.sched_yield()
    server.stop()


def measure(address: str, messages: int) -> dict[str, list[float]]:
    client = MetadataClient(address, 20.0, "worker0", direct=False)
    body = StepDone(rank=0, stored=[], store_failed=[], loaded_blocks=0, load_failed_blocks=0)
    out: dict[str, list[float]] = {"call": [], "send": []}
    try:
        client.call(body)
        for i in range(messages):
            for how in ("call", "send") if i % 2 else ("send", "call"):
                started = time.perf_counter()
                getattr(client, how)(body)
                out[how].append(time.perf_counter() - started)
                time.sleep(0.002)  # a forward pass between two steps' messages
    finally:
        client.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=400, help="messages per variant")
    args = parser.parse_args(argv)
    address = f"ipc://{tempfile.mkdtemp(prefix='vam-stepdone-')}/meta.ipc"
    ctx = mp.get_context("spawn")
    stop, ready = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=serve, args=(address, stop, ready), daemon=True)
    proc.start()
    try:
        if not ready.wait(30):
            print("offload_stepdone_bench: the server process did not start", file=sys.stderr)
            return 1
        load = os.getloadavg()[0]
        samples = measure(address, args.messages)
    finally:
        stop.set()
        proc.join(10)
    print(f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after; {args.messages} each")
    for how, values in samples.items():
        us = sorted(v * 1e6 for v in values)
        print(
            f"StepDone by {how}: median {statistics.median(us):.0f} us, "
            f"p90 {us[int(len(us) * 0.9)]:.0f} us, max {us[-1]:.0f} us"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
