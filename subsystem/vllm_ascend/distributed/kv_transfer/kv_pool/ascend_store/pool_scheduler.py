"""Scheduler side of the KV pool: what the pool holds for a request, and what to load and save.

Per request, `get_num_new_matched_tokens` asks the pool about every full prompt block in ONE
batched `exists` call (all workers' keys of all blocks): the longest prefix present on every
worker is the hit, and the per-block answer is kept to skip saving blocks the pool already has.
Whole blocks only, and never the prompt's last token (vLLM must compute at least one token).

Loads are planned when vLLM allocates blocks for the hit (`update_state_after_alloc`); saves are
planned each step for prompt blocks whose KV becomes complete in that step
(`build_connector_meta`). A request with saves keeps its blocks after it finishes
(`request_finished` returns True) until every worker reports its saves done.

A pool that fails (see `pool_guard.PoolGuard`) answers "nothing present": requests run as if
the pool were empty, and the loss is logged once. The `exists` call runs on a thread
(`bounded_call.BoundedCall`): the step waits for it at most `lookup_timeout_s`, a lookup past
that is a miss, and one stuck call turns later lookups into misses until it returns. Blocks
whose load failed (the workers' `invalid_block_ids`, seen in `update_connector_output`) are
answered "absent" without asking the store for `failed_load_ttl_s`
(`load_failures.RecentLoadFailures`): a silent host's keys stay listed for a while, and each
retried load would fail again after its timeouts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import Backend
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.bounded_call import BoundedCall
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.config_data import (
    AscendStoreConfig,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.load_failures import (
    RecentLoadFailures,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_client import (
    check_single_group,
    open_pool,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.stats import AscendStoreStats
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.step_metadata import (
    AscendConnectorMetadata,
    ReqMeta,
)
from vllm_ascend.distributed.kv_transfer.utils.connector_stats import StatsRecorder
from vllm_ascend.distributed.kv_transfer.utils.scheduler_inputs import (
    scheduled_requests,
    track_allocated,
)
from vllm_ascend.logger import init_logger

if TYPE_CHECKING:
    from collections.abc import Sequence

    from vllm.config import VllmConfig
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request

__all__ = ["KVPoolScheduler", "check_single_group"]

logger = init_logger(__name__)

# vLLM's non-cryptographic prefix-cache hashes use a per-process random seed unless
# PYTHONHASHSEED is set: their block hashes then differ between engines.
_PER_PROCESS_HASHES = ("xxhash", "xxhash_cbor")

# Bound on the block hashes remembered as failed loads (oldest dropped first): ~150 bytes
# each, and far more than the blocks a scheduler loads within one `failed_load_ttl_s`.
FAILED_LOAD_MAX_BLOCKS = 16384


@dataclass
class _Lookup:
    num_computed_tokens: int
    present: list[bool]


@dataclass
class _RequestState:
    request: Request
    block_ids: list[int] = field(default_factory=list)
    # Per prompt block: in the pool at the last lookup (None: never looked up).
    in_pool: list[bool] | None = None
    # Prompt blocks below this index are saved, being saved, loaded or skipped.
    saved_upto: int = 0
    has_saves: bool = False
    # A synchronous load was planned: the workers hold the blocks until its store call returned.
    has_sync_load: bool = False


class KVPoolScheduler:
    """Scheduler-side logic; `AscendStoreConnector` forwards the scheduler methods here.

    Args:
        vllm_config: the engine's config (KV role, parallel sizes, model).
        kv_cache_config: the KV cache layout (block size, bytes per block for the keys).
        config: the connector's validated extra config.
        backend: a connected store client (default: a lookup-only client from `config`).
        clock: time source (seconds, monotonic) of the failed-load memory, for tests.

    Raises:
        ValueError: an unsupported KV cache layout or an invalid store config.
        BackendError: the store cannot be reached.
    """

    def __init__(
        self,
        vllm_config: VllmConfig,
        kv_cache_config: KVCacheConfig,
        config: AscendStoreConfig,
        backend: Backend | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        pool = open_pool(
            vllm_config, kv_cache_config, config, backend, side="scheduler", lookup_only=True
        )
        self.block_size, self.db, self.backend, self.guard = (
            pool.block_size,
            pool.db,
            pool.backend,
            pool.guard,
        )
        self.key_metadata = pool.db.metadata
        # The engine step waits at most `lookup_timeout_s` for the pool's answer.
        self.exists: BoundedCall[list[int]] = BoundedCall(
            self.guard, "lookup", config.lookup_timeout_s
        )
        transfer = vllm_config.kv_transfer_config
        assert transfer is not None
        self.load_enabled = transfer.is_kv_consumer
        self.save_enabled = transfer.is_kv_producer
        self.load_async = config.load_async
        algo = vllm_config.cache_config.prefix_caching_hash_algo
        if algo in _PER_PROCESS_HASHES and os.environ.get("PYTHONHASHSEED") is None:
            logger.warning(
                "prefix_caching_hash_algo=%s without PYTHONHASHSEED: block hashes differ "
                "between engines, so this engine will not share KV pool entries",
                algo,
            )
        self.num_lookups = 0
        self.recorder = StatsRecorder(AscendStoreStats)
        self._requests: dict[str, _RequestState] = {}
        self._lookups: dict[str, _Lookup] = {}
        self._step_loads: list[ReqMeta] = []
        self.failed_loads = RecentLoadFailures(
            config.failed_load_ttl_s, FAILED_LOAD_MAX_BLOCKS, clock
        )
        # KV cache block id -> hash of the block last planned to load into it: the workers
        # report failed loads by block id. At most one entry per KV cache block.
        self._load_hashes: dict[int, bytes] = {}
        logger.info(
            "AscendStoreConnector scheduler: backend %s, keys %s*, load %s, save %s",
            self.backend.name,
            self.key_metadata.prefix(0, 0).rsplit("/", 2)[0],
            ("async" if self.load_async else "sync") if self.load_enabled else "off",
            "on" if self.save_enabled else "off",
        )

    # ---- lookups ----------------------------------------------------------------------------

    def lookup(self, block_hashes: Sequence[bytes]) -> list[bool]:
        """Whether each block is in the pool on every worker: at most one `exists` round trip.

        A pool that is bypassed or fails answers all False; a block whose load failed within
        `failed_load_ttl_s` is False without asking the store (no round trip if all are).
        """
        if not block_hashes:
            return []
        healthy = self.guard.healthy
        # While the pool is lost the trial runs in the background (its answer recovers it):
        # the step waits neither for it nor for a TCP probe.
        if not self.guard.available("lookup", probe=False):
            return [False] * len(block_hashes)
        asked = [i for i, h in enumerate(block_hashes) if h not in self.failed_loads]
        self.recorder.add("failed_load_misses", len(block_hashes) - len(asked))
        present = [False] * len(block_hashes)
        if not asked:
            return present
        keys = self.db.keys_all_ranks([block_hashes[i] for i in asked])
        self.num_lookups += 1
        self.recorder.add("lookups")
        found = self.exists.run(partial(self.backend.exists, keys), wait=healthy)
        if found is None:
            self.recorder.add("unanswered_lookups")
            return present
        ranks = len(self.key_metadata.ranks())
        for n, i in enumerate(asked):
            present[i] = all(found[n * ranks : (n + 1) * ranks])
        return present

    def get_num_new_matched_tokens(
        self, request: Request, num_computed_tokens: int
    ) -> tuple[int, bool]:
        """Tokens beyond `num_computed_tokens` whose KV the pool holds, and whether they load
        asynchronously."""
        req_id = request.request_id
        self._lookups.pop(req_id, None)
        if not (self.load_enabled or self.save_enabled):
            return 0, False
        hashes = request.block_hashes
        prompt_blocks = min(len(hashes), request.num_prompt_tokens // self.block_size)
        present = self.lookup(hashes[:prompt_blocks])
        self._lookups[req_id] = _Lookup(num_computed_tokens, present)
        if not self.load_enabled:
            return 0, False
        limit = min(prompt_blocks, (request.num_tokens - 1) // self.block_size)
        hit = 0
        while hit < limit and present[hit]:
            hit += 1
        external = hit * self.block_size - num_computed_tokens
        if external <= 0:
            return 0, False
        self.recorder.add("hit_blocks", external // self.block_size)
        return external, self.load_async

    # ---- allocation and per-step metadata -------------------------------------------------

    def update_state_after_alloc(
        self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int
    ) -> None:
        """Track the request; plan the load of its hit into the blocks vLLM allocated."""
        state, found = track_allocated(request, self._requests, _RequestState, self._lookups)
        if found is None:
            return
        state.in_pool = found.present
        if num_external_tokens <= 0:
            return
        first = found.num_computed_tokens // self.block_size
        count = num_external_tokens // self.block_size
        block_ids = blocks.get_block_ids()[0]
        load = ReqMeta(
            request.request_id,
            list(block_ids[first : first + count]),
            list(request.block_hashes[first : first + count]),
            is_async=self.load_async,
        )
        self._load_hashes.update(zip(load.block_ids, load.block_hashes, strict=True))
        self._step_loads.append(load)
        state.has_sync_load = state.has_sync_load or not load.is_async

    def update_connector_output(self, connector_output: KVConnectorOutput) -> None:
        """Remember the blocks the workers failed to load (`invalid_block_ids`) as misses.

        A block id is mapped to the hash last planned to load into it; a failure reported
        after its block was reused for another load (preemption under asynchronous
        scheduling) marks that load's hash instead: a needless miss for a while, never a
        wrong hit.
        """
        failed = [
            self._load_hashes.pop(block_id)
            for block_id in connector_output.invalid_block_ids
            if block_id in self._load_hashes
        ]
        if failed:
            self.failed_loads.add(failed)
            logger.debug(
                "KV pool: %d block(s) failed to load; answered as misses for %g s",
                len(failed),
                self.failed_loads.ttl_s,
            )

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> AscendConnectorMetadata:
        """This step's loads (planned at allocation) and saves (blocks complete after it)."""
        saves: list[ReqMeta] = []
        for state, done in scheduled_requests(scheduler_output, self._requests):
            self._plan_save(state, done, saves)
        meta = AscendConnectorMetadata(
            loads=self._step_loads,
            saves=saves,
            preempted_req_ids=sorted(scheduler_output.preempted_req_ids or ()),
        )
        self._step_loads = []
        return meta

    def _plan_save(self, state: _RequestState, done_tokens: int, out: list[ReqMeta]) -> None:
        if not self.save_enabled:
            return
        request = state.request
        hashes = request.block_hashes
        full = min(done_tokens, request.num_prompt_tokens) // self.block_size
        full = min(full, len(hashes), len(state.block_ids))
        first = state.saved_upto
        if full <= first:
            return
        state.saved_upto = full
        in_pool = state.in_pool or []
        todo = [i for i in range(first, full) if not (i < len(in_pool) and in_pool[i])]
        if not todo:
            return
        out.append(
            ReqMeta(
                request.request_id,
                [state.block_ids[i] for i in todo],
                [hashes[i] for i in todo],
            )
        )
        state.has_saves = True

    def request_finished(self, request: Request) -> bool:
        """Forget the request; True when it had saves or a synchronous load (its blocks wait
        for the workers' store calls)."""
        self._lookups.pop(request.request_id, None)
        state = self._requests.pop(request.request_id, None)
        return bool(state is not None and (state.has_saves or state.has_sync_load))

    def take_stats(self) -> AscendStoreStats | None:
        """The scheduler side's counter increases since the last call (vLLM's metrics)."""
        self.recorder.add("pool_failures", self.guard.take_failures())
        return self.recorder.take()

    def shutdown(self) -> None:
        self.exists.close()
        self.backend.close()
