"""`SyncLoads`: the KV pool worker's synchronous loads, which an engine step waits on for at most
`sync_load_timeout_s`.

A synchronous load (`load_async` false) must be in the KV cache before the step's forward pass.
Its store call can wait far longer than a step may: a pool host cut off the network answers
nothing, and Mooncake gives up only after its own transfer timeouts (`MC_TCP_*_TIMEOUT_SEC`,
8 s or more), holding every request of the batch meanwhile. Here the call runs on one daemon
thread (`BoundedCall`); past the bound the step goes on with the load's blocks failed (vLLM
recomputes them, `kv_load_failure_policy`), and while that call is still out, later
synchronous loads fail at once instead of queueing behind it.

A call past the bound cannot be recalled and may still write into the blocks it was given, so
its requests stay held in the `SaveTracker` until it returned: the scheduler delays their free
(`request_finished` says so for every request with a synchronous load), and a preempted
request's blocks are not reused before (`handle_preemptions` waits).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.block_io import load_blocks
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.bounded_call import BoundedCall

if TYPE_CHECKING:
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import Backend
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.block_layout import (
        KVCacheLayout,
    )
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.config_data import (
        AscendStoreConfig,
    )
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_guard import PoolGuard
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.save_tracker import (
        SaveTracker,
    )

__all__ = ["SyncLoads"]


class SyncLoads:
    """Run synchronous loads on a loading thread, waiting `config.sync_load_timeout_s` at most.

    Args:
        backend: the worker's store client.
        guard: the worker's failure policy (a load past the bound marks the pool lost).
        holds: where the requests of a running load are held (`add` / `release`).
        config: `sync_load_timeout_s`, `transfer_batch_keys`.
    """

    def __init__(
        self, backend: Backend, guard: PoolGuard, holds: SaveTracker, config: AscendStoreConfig
    ) -> None:
        self.backend = backend
        self.guard = guard
        self.holds = holds
        self.timeout_s = config.sync_load_timeout_s
        self.batch_keys = config.transfer_batch_keys
        self._call: BoundedCall[list[int]] = BoundedCall(guard, "load", self.timeout_s)

    def load(
        self, layout: KVCacheLayout, keys: list[str], block_ids: list[int], held: list[str]
    ) -> list[int]:
        """Read `keys[i]` into block `block_ids[i]` for the requests `held`; the block ids that
        did not load (all of them when the bound passed or an earlier load is still stuck).

        Returns within about `sync_load_timeout_s`, whatever the store does.
        """
        for req_id in held:
            self.holds.add(req_id)

        def call() -> list[int]:
            try:
                self.backend.set_device()
                deadline = time.monotonic() + self.timeout_s
                return load_blocks(
                    self.backend,
                    self.guard,
                    layout,
                    keys,
                    block_ids,
                    self.batch_keys,
                    deadline=deadline,
                )
            finally:
                self.holds.release(held)

        turned_away = self._call.busy  # only the step's thread calls `run`
        failed = self._call.run(call)
        if self._call.busy > turned_away:  # an earlier load is still stuck: `call` never runs
            self.holds.release(held)
        if failed is not None:
            return failed
        self.guard.log.warning(
            "sync_load_timeout",
            "KV pool: synchronous load of %d block(s) not done within sync_load_timeout_s=%g s "
            "(or an earlier one still stuck in the store); they fail as load errors "
            "(kv_load_failure_policy applies); pool %s",
            len(keys),
            self.timeout_s,
            self.backend.service,
        )
        return list(block_ids)

    def close(self) -> None:
        """Stop the loading thread once its current call returns (not waited for)."""
        self._call.close()
