"""How long the other decodes' steps stall while a layerwise prefill pushes 1 s late.

Real parts: a layerwise prefill worker in its own process (tests/subsystem/mooncake_peer.py),
the decode `MooncakeLayerwiseWorker` here, the real side channel (ZMQ) and Mooncake transfer
engines. The decode side registers a load; the prefill side pushes every layer `--delay-s`
later; meanwhile the decode side runs steps every 10 ms (`wait_for_layer_load` for each layer,
then `get_finished`: the connector's part of a forward pass of the running decodes). Prints
the longest step wait per run and their median.

    PYTHONPATH=$PWD:$PWD/subsystem python benchmarks/layerwise_late_push.py --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "subsystem")]

from test_mooncake_layerwise_faults import GEOMETRY, layerwise_decode_worker, load  # noqa: E402
from test_mooncake_p2p_worker import WAIT_S, Peer, free_port, spec_for  # noqa: E402

from tests.polling import wait_until  # noqa: E402
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_metadata import (  # noqa: E402
    LayerwiseMetadata,
)


def one_run(peer: Peer, kv_port: int, run: int, delay_s: float) -> float:
    worker, _ = layerwise_decode_worker()
    transfer_id = f"t-late{run}"
    try:
        worker.bind(LayerwiseMetadata(loads=[load(transfer_id, kv_port, [3, 4])]))
        wait_until(
            lambda: peer.command(op="stats").get("push_requests_received", 0) >= run + 1,
            WAIT_S,
            "the push request registered",
            0.05,
        )
        push = {"op": "push", "request_id": f"p{run}", "transfer_id": transfer_id}
        timer = threading.Timer(delay_s, peer.command, kwargs={**push, "block_ids": [10, 11]})
        timer.start()
        waits = []
        started = time.monotonic()
        while time.monotonic() - started < delay_s + 0.5:
            t0 = time.monotonic()
            for layer in range(GEOMETRY["layers"]):
                worker.wait_for_layer_load(f"layers.{layer}")
            worker.get_finished()
            waits.append(time.monotonic() - t0)
            time.sleep(0.01)
        timer.join()
        return max(waits)
    finally:
        worker.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--delay-s", type=float, default=1.0, help="how late the push comes")
    args = parser.parse_args()
    kv_port = free_port()
    log = Path(tempfile.mkdtemp()) / "prefill.log"
    peer = Peer({**spec_for(kv_port, 1, 2), "layerwise": True}, log)
    try:
        stalls = [one_run(peer, kv_port, run, args.delay_s) for run in range(args.runs)]
    finally:
        peer.close()
    print(
        f"push {args.delay_s:g} s late: longest step wait per run (s) "
        f"{[round(s, 3) for s in stalls]}, median {statistics.median(stalls):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
