"""How long the KV pool's scheduler-side lookups hold engine steps while the pool master hangs.

Real parts: a `mooncake_master`, a pool client holding the pool's memory, and the connector's
`KVPoolScheduler` with real vLLM requests (the same set-up as
tests/subsystem/test_kvpool_master_hang.py). The master is SIGSTOPped for `--hang-s` seconds
while a lookup runs every 100 ms (what `get_num_new_matched_tokens` costs each engine step that
admits a request); prints the longest lookup, their total, and how many exceeded 0.5 s.

    PYTHONPATH=$PWD:$PWD/subsystem python benchmarks/kvpool_master_hang.py --hang-s 45
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "e2e")]

from kvpool_master import MooncakeMaster  # noqa: E402
from tiny_model import build_tiny_llama  # noqa: E402

from tests.subsystem.test_kvpool_scheduler import (  # noqa: E402
    BS,
    fill,
    kv_cache_config,
    request,
    vllm_config,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.mooncake_backend import (  # noqa: E402
    MooncakeBackend,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.config_data import (  # noqa: E402
    AscendStoreConfig,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_scheduler import (  # noqa: E402
    KVPoolScheduler,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hang-s", type=float, default=45.0, help="SIGSTOP length, seconds")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    model = build_tiny_llama(tmp / "model", seed=0)
    master = MooncakeMaster(tmp).start()
    holder = MooncakeBackend(None, master.store_config(global_segment_size="32MB"))
    config = AscendStoreConfig.from_extra_config({"mooncake": master.store_config()})
    sched = KVPoolScheduler(vllm_config(model), kv_cache_config(), config)
    fill(holder, sched.db, request("warm", 4 * BS + 5, seed=7).block_hashes[:4])
    assert master.service is not None and master.service.proc is not None
    group = master.service.proc.pid
    os.killpg(group, signal.SIGSTOP)
    started, durations = time.monotonic(), []
    try:
        while time.monotonic() - started < args.hang_s:
            req = request(f"r{len(durations)}", 4 * BS + 5, seed=7)
            t0 = time.monotonic()
            sched.get_num_new_matched_tokens(req, 0)
            durations.append(time.monotonic() - t0)
            time.sleep(0.1)
    finally:
        os.killpg(group, signal.SIGCONT)
    print(
        f"{args.hang_s:g} s SIGSTOP: {len(durations)} lookups, longest {max(durations):.3f} s, "
        f"{sum(durations):.1f} s held in all, {sum(d > 0.5 for d in durations)} over 0.5 s"
    )
    sched.shutdown()
    holder.close()
    master.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
