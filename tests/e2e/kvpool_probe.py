"""Code the KV pool e2e tests run inside an engine process (`EngineProcess.call` targets).

Functions take the `vllm.LLM` first and return JSON-able values. All of them need the uniproc
setting (`VLLM_ENABLE_V1_MULTIPROCESSING=0` and the uni executor): the scheduler-side and the
worker-side connector then both live in the process that runs them.

`vanish_after_lookup` is the S14 fault: after each lookup that finds a hit, the last hit block
is deleted from the pool (as an eviction by another engine would), so the load that follows
misses exactly that block.
"""

from __future__ import annotations

import time
from typing import Any

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.ascend_store_connector import (
    AscendStoreConnector,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_scheduler import (
    KVPoolScheduler,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_worker import KVPoolWorker

# What the S14 patch deleted and what the worker reported, as vLLM block ids.
_RECORD: dict[str, list[int]] = {"vanished_block_ids": [], "reported_block_ids": []}


def _vllm_scheduler(llm: Any) -> Any:
    return llm.llm_engine.engine_core.engine_core.scheduler


def pool_scheduler(llm: Any) -> KVPoolScheduler:
    connector = _vllm_scheduler(llm).connector
    assert isinstance(connector, AscendStoreConnector) and connector.scheduler is not None
    return connector.scheduler


def pool_worker(llm: Any) -> KVPoolWorker:
    from vllm.distributed.kv_transfer import get_kv_transfer_group

    connector = get_kv_transfer_group()
    assert isinstance(connector, AscendStoreConnector) and connector.worker is not None
    return connector.worker


def wait_saves(llm: Any, wait_s: float = 120.0) -> dict[str, Any]:
    """Wait until the worker has no save pending, then let finished requests release their
    blocks; returns the worker's stats.

    A finished request with saves keeps its blocks until the step after its saves are done
    (the worker reports it in `finished_sending`). A server's engine loop keeps stepping while
    such requests exist; the offline `LLM` in this process stops stepping when `generate`
    returns, so this steps it until the scheduler has nothing left to release.
    """
    worker = pool_worker(llm)
    if not worker.wait_idle(wait_s):
        raise TimeoutError(f"saves still pending after {wait_s} s: {worker.stats()}")
    scheduler = _vllm_scheduler(llm)
    for _ in range(20):
        if not scheduler.has_finished_requests():
            break
        llm.llm_engine.step()
    else:
        raise TimeoutError("finished requests still hold blocks after 20 engine steps")
    return worker.stats()


def stats(llm: Any) -> dict[str, Any]:
    sched = pool_scheduler(llm)
    return {
        **pool_worker(llm).stats(),
        "lookups": sched.num_lookups,
        "scheduler_pool_healthy": sched.guard.healthy,
    }


def free_device_blocks(llm: Any) -> int:
    return int(_vllm_scheduler(llm).kv_cache_manager.block_pool.get_num_free_blocks())


def set_load_async(llm: Any, value: bool) -> bool:
    pool_scheduler(llm).load_async = bool(value)
    return bool(value)


def vanish_after_lookup(llm: Any, enabled: bool) -> bool:
    """Turn the S14 fault on or off (patches this engine's pool scheduler and worker)."""
    sched = pool_scheduler(llm)
    worker = pool_worker(llm)
    for obj, name in (
        (sched, "get_num_new_matched_tokens"),
        (sched, "update_state_after_alloc"),
        (worker, "get_block_ids_with_load_errors"),
    ):
        obj.__dict__.pop(name, None)  # back to the class's method
    _RECORD["vanished_block_ids"].clear()
    _RECORD["reported_block_ids"].clear()
    if not enabled:
        return False
    pending: dict[str, int] = {}
    lookup = sched.get_num_new_matched_tokens
    after_alloc = sched.update_state_after_alloc
    errors = worker.get_block_ids_with_load_errors

    def get_num_new_matched_tokens(request: Any, num_computed_tokens: int) -> tuple[int, bool]:
        tokens, is_async = lookup(request, num_computed_tokens)
        if tokens:
            last = (num_computed_tokens + tokens) // sched.block_size - 1
            keys = sched.db.keys_all_ranks([request.block_hashes[last]])
            sched.backend.remove(keys)  # type: ignore[attr-defined]  # MooncakeBackend only
            pending[request.request_id] = last
        return tokens, is_async

    def update_state_after_alloc(request: Any, blocks: Any, num_external_tokens: int) -> None:
        after_alloc(request, blocks, num_external_tokens)
        index = pending.pop(request.request_id, None)
        if index is not None and num_external_tokens:
            _RECORD["vanished_block_ids"].append(blocks.get_block_ids()[0][index])

    def get_block_ids_with_load_errors() -> set[int]:
        found = errors()
        _RECORD["reported_block_ids"].extend(found)
        return found

    sched.get_num_new_matched_tokens = get_num_new_matched_tokens  # type: ignore[method-assign]
    sched.update_state_after_alloc = update_state_after_alloc  # type: ignore[method-assign]
    worker.get_block_ids_with_load_errors = get_block_ids_with_load_errors  # type: ignore[method-assign]
    return True


def vanish_record(llm: Any) -> dict[str, list[int]]:
    return {k: sorted(v) for k, v in _RECORD.items()}


def sleep(llm: Any, seconds: float) -> float:
    """Let background threads run without a request (e.g. the master's reconnect)."""
    time.sleep(seconds)
    return seconds
