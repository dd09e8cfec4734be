"""How long the KV pool's synchronous loads hold engine steps while the pool host is cut off.

Real parts (as root, like the soak): `mooncake_master` and a standalone `mooncake_client`
holding the pool's memory, each on its own network-namespace host (`soaklib.parts.Pool`); a
`KVPoolWorker` here, with no memory of its own and Mooncake's TCP transfer timeouts at 8 s (the
soak's pool engine). The worker saves blocks (they land in the pool host's memory), then the
pool host's switch port goes down for `--hold-s` seconds while a "step" runs every 100 ms: one
synchronous load of those blocks (what `start_load_kv` costs an engine step that admits a pool
hit), and on for `AFTER_S` after the link is back. Each step's duration is recorded. (The cut
outlasts the master's client TTL: it forgets the pool host's keys, so loads after the cut miss.)

Both sides in one run, back to back on the same pool: `sync_load_timeout_s` unbounded (1e6 s:
the worker before the bound, which called the store on the step's thread) and bounded (the
default, 2 s).

    python benchmarks/kvpool_link_cut.py --hold-s 30 --json benchmarks/results/kvpool_link_cut.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / p) for p in ("", "subsystem", "tests/e2e", "benchmarks")]
# The soak's pool engine: a transfer to a silent host ends after 8 s (Mooncake's default is
# longer); set before Mooncake is imported.
os.environ.setdefault("MC_TCP_PROGRESS_TIMEOUT_SEC", "8")
os.environ.setdefault("MC_TCP_STATUS_TIMEOUT_SEC", "8")
os.environ.setdefault("MC_LOG_LEVEL", "ERROR")

from netns import probe  # noqa: E402
from run_info import run_info  # noqa: E402
from soaklib.parts import Pool  # noqa: E402

STEP_PAUSE_S = 0.1
BLOCKS = 4
AFTER_S = 15.0  # steps go on this long after the link is back


def make_worker(pool: Pool, model: Path, bound_s: float) -> Any:
    from vllm.config import KVTransferConfig
    from vllm.engine.arg_utils import EngineArgs

    from tests.subsystem.test_kvpool_load_deadline import BS, kv_cache_config, kv_caches
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.config_data import (
        AscendStoreConfig,
    )
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_worker import (
        KVPoolWorker,
    )

    vllm_config = EngineArgs(
        model=str(model), dtype="bfloat16", block_size=BS, max_model_len=1024, enforce_eager=True,
        kv_transfer_config=KVTransferConfig(kv_connector="AscendStoreConnector", kv_role="kv_both"),
    ).create_engine_config()  # fmt: skip
    config = AscendStoreConfig.from_extra_config(
        {"mooncake": pool.store_config(), "retry_interval_s": 2, "sync_load_timeout_s": bound_s}
    )
    worker = KVPoolWorker(vllm_config, kv_cache_config(), config, ranks=(0, 0))
    caches = kv_caches()
    for tensor in caches.values():
        tensor.normal_()
    worker.register_kv_caches(caches)
    return worker, caches


def step(worker: Any, hashes: list[bytes]) -> tuple[float, int]:
    """One step's synchronous load of `hashes` into blocks 8..; (seconds, failed blocks)."""
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.step_metadata import (
        AscendConnectorMetadata,
        ReqMeta,
    )

    load = ReqMeta(f"load-{uuid.uuid4().hex[:8]}", list(range(8, 8 + len(hashes))), hashes)
    started = time.monotonic()
    worker.start_load_kv(AscendConnectorMetadata(loads=[load]))
    took = time.monotonic() - started
    worker.get_finished({load.req_id})
    return took, len(worker.get_block_ids_with_load_errors())


def run_steps(worker: Any, hashes: list[bytes], for_s: float) -> list[tuple[float, int]]:
    """Steps every `STEP_PAUSE_S` for `for_s` seconds (the last one may end later)."""
    started, steps = time.monotonic(), []
    while time.monotonic() - started < for_s:
        steps.append(step(worker, hashes))
        time.sleep(STEP_PAUSE_S)
    return steps


def one_side(pool: Pool, model: Path, bound_s: float, hold_s: float) -> dict[str, Any]:
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.step_metadata import (
        AscendConnectorMetadata,
        ReqMeta,
    )

    pool.wait_mounted()  # the previous side's cut made the master forget the pool host
    worker, _ = make_worker(pool, model, bound_s)
    try:
        hashes = [uuid.uuid4().bytes for _ in range(BLOCKS)]
        worker.wait_for_save(
            AscendConnectorMetadata(saves=[ReqMeta("save", list(range(BLOCKS)), hashes)])
        )
        assert worker.wait_idle(30), "the saves did not finish"
        warm, failed = step(worker, hashes)
        assert failed == 0, f"{failed} block(s) did not load before the cut"
        pool.network.cut("pool")
        cut_steps = run_steps(worker, hashes, hold_s)
        pool.network.restore("pool")
        after_steps = run_steps(worker, hashes, AFTER_S)
        durations = [s for s, _ in cut_steps + after_steps]
        return {
            "sync_load_timeout_s": bound_s,
            "warm_step_s": round(warm, 4),
            "steps": len(durations),
            "max_step_s_link_down": round(max(s for s, _ in cut_steps), 3),
            "max_step_s_after": round(max(s for s, _ in after_steps), 3),
            "steps_over_0.5s": sum(d > 0.5 for d in durations),
            "time_in_steps_over_0.5s": round(sum(d for d in durations if d > 0.5), 2),
            "failed_blocks": sum(f for _, f in cut_steps + after_steps),
        }
    finally:
        worker.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hold-s", type=float, default=30.0, help="link down, seconds")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    reason = probe()
    if reason is not None:
        print(f"kvpool_link_cut: network namespaces unavailable: {reason}", file=sys.stderr)
        return 2
    from tiny_model import build_tiny_llama

    tmp = Path(tempfile.mkdtemp(prefix="vam-linkcut-"))
    model = build_tiny_llama(tmp / "model", seed=0)
    sides = []
    with Pool(tmp, f"10.204.{os.getpid() % 250}", 10) as pool:
        pool.wait_mounted()
        for bound_s in (1e6, 2.0):
            sides.append(one_side(pool, model, bound_s, args.hold_s))
            print(json.dumps(sides[-1]), flush=True)
    out = {
        "command": " ".join(["python", *sys.argv]),
        **run_info("vllm", "mooncake"),
        "load_average_1m": os.getloadavg()[0],
        "hold_s": args.hold_s,
        "sides": sides,
    }
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
