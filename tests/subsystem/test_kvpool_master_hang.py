"""A hung or restarted `mooncake_master` (real process, SIGSTOP / SIGKILL) under the pool's
scheduler side with real vLLM requests: a lookup never holds the engine step longer than
`lookup_timeout_s`, lookups past it are misses, one call at most waits on the hung master,
recovery is declared only when the master answers, and the loss and the recovery are logged
once each, naming the master's address."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
for _name in ("vllm", "transformers", "tokenizers", "mooncake.store"):
    pytest.importorskip(_name)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from kvpool_master import MooncakeMaster  # noqa: E402

from tests.subsystem.test_kvpool_scheduler import (  # noqa: E402
    BS,
    fill,
    kv_cache_config,
    model_dirs,
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

__all__ = ["model_dirs"]  # the fixture, shared with the scheduler tests

LOOKUP_TIMEOUT_S = 0.5
# The step bound plus what a loaded 2-core machine adds to a thread hand-off.
STEP_BOUND_S = LOOKUP_TIMEOUT_S + 0.5
HANG_S = 12.0  # well under Mooncake's ~30 s RPC timeout: only our bound can end a lookup


@pytest.fixture
def pool(
    tmp_path: Path, model_dirs: tuple[Path, Path]
) -> Iterator[tuple[MooncakeMaster, MooncakeBackend, KVPoolScheduler]]:
    master = MooncakeMaster(tmp_path).start()
    # The pool's memory lives in a client of its own, as in a deployment with a standalone one.
    holder = MooncakeBackend(None, master.store_config(global_segment_size="32MB"))
    config = AscendStoreConfig.from_extra_config(
        {
            "mooncake": master.store_config(),
            "lookup_timeout_s": LOOKUP_TIMEOUT_S,
            "retry_interval_s": 1.0,
        }
    )
    sched = KVPoolScheduler(vllm_config(model_dirs[0]), kv_cache_config(), config)
    try:
        yield master, holder, sched
    finally:
        master_proc = master.service.proc if master.service else None
        if master_proc is not None:
            os.killpg(master_proc.pid, signal.SIGCONT)
        sched.shutdown()
        holder.close()
        master.stop()


def pool_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    lines = [r.getMessage() for r in caplog.records]
    return [line for line in lines if "KV pool (mooncake, scheduler)" in line]


def refill(holder: MooncakeBackend, sched: KVPoolScheduler, hashes: list[bytes]) -> None:
    """Store `hashes` again once the pool's own client has its memory mounted on the master
    (a master that was gone or stopped past `--client_ttl` dropped it, with every key)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            fill(holder, sched.db, hashes)
            return
        except AssertionError:
            assert time.monotonic() < deadline, "the pool client never came back"
            time.sleep(0.5)


def timed_lookup(sched: KVPoolScheduler, req_id: str, seed: int) -> tuple[float, int]:
    req = request(req_id, 4 * BS + 5, seed=seed)
    started = time.monotonic()
    tokens, _ = sched.get_num_new_matched_tokens(req, 0)
    return time.monotonic() - started, tokens


def test_a_stopped_master_costs_a_step_at_most_the_bound_and_recovers_when_it_answers(
    pool: tuple[MooncakeMaster, MooncakeBackend, KVPoolScheduler],
    caplog: pytest.LogCaptureFixture,
) -> None:
    master, holder, sched = pool
    fill(holder, sched.db, request("warm", 4 * BS + 5, seed=7).block_hashes[:4])
    assert timed_lookup(sched, "hit", 7)[1] == 4 * BS
    assert master.service is not None and master.service.proc is not None
    group = master.service.proc.pid
    threads_before = threading.active_count()
    with caplog.at_level(logging.WARNING):
        os.killpg(group, signal.SIGSTOP)
        stopped = time.monotonic()
        lookups = []
        while time.monotonic() - stopped < HANG_S:
            lookups.append(timed_lookup(sched, f"hung{len(lookups)}", 7))
            time.sleep(0.1)
        # Every lookup returned within the bound, as a miss, while the master stayed stopped.
        assert max(d for d, _ in lookups) < STEP_BOUND_S, lookups
        assert {t for _, t in lookups} == {0}, lookups
        # Only the first waited; the others found its call still stuck and did not queue.
        assert sum(d > LOOKUP_TIMEOUT_S / 2 for d, _ in lookups) <= 2, lookups
        assert threading.active_count() <= threads_before
        # A TCP connect to the stopped master succeeds (the kernel accepts): not a recovery.
        assert sched.backend.is_reachable()
        assert not sched.guard.healthy
        lost = pool_lines(caplog)
        assert len(lost) == 1, lost
        assert "unavailable during lookup" in lost[0] and master.address in lost[0]
        os.killpg(group, signal.SIGCONT)
        # The stuck call gets its answer: the pool is declared back...
        deadline = time.monotonic() + 30
        while not sched.guard.healthy:
            assert time.monotonic() < deadline, pool_lines(caplog)
            assert timed_lookup(sched, "back", 7)[0] < STEP_BOUND_S
            time.sleep(0.2)
        # ...and lookups reach it again (the 12 s stop outlived the master's client TTL, which
        # may have dropped the pool client's memory and keys with it).
        refill(holder, sched, request("warm", 4 * BS + 5, seed=7).block_hashes[:4])
        assert timed_lookup(sched, "again", 7)[1] == 4 * BS
    lines = pool_lines(caplog)
    assert len(lines) == 2, lines
    assert "answers again" in lines[1] and master.address in lines[1]
    assert sched.guard.healthy


def test_a_restarted_master_recovers_the_pool(
    pool: tuple[MooncakeMaster, MooncakeBackend, KVPoolScheduler],
    caplog: pytest.LogCaptureFixture,
) -> None:
    master, holder, sched = pool
    hashes = request("warm", 4 * BS + 5, seed=8).block_hashes[:4]
    fill(holder, sched.db, hashes)
    assert timed_lookup(sched, "hit", 8)[1] == 4 * BS
    with caplog.at_level(logging.WARNING):
        master.kill()
        duration, tokens = timed_lookup(sched, "dead", 8)
        assert (tokens, duration < STEP_BOUND_S) == (0, True)
        master.start()  # same ports, empty: every key is gone
        deadline = time.monotonic() + 60
        while not sched.guard.healthy:
            assert time.monotonic() < deadline, pool_lines(caplog)
            assert timed_lookup(sched, "probe", 8)[0] < STEP_BOUND_S
            time.sleep(0.2)
        refill(holder, sched, hashes)
        assert timed_lookup(sched, "again", 8)[1] == 4 * BS
    lines = pool_lines(caplog)
    assert len(lines) == 2, lines
    assert master.address in lines[0] and master.address in lines[1]
