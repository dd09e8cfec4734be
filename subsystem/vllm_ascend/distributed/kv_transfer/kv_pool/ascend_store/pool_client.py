"""What the scheduler and the worker side of `AscendStoreConnector` both open: the pool.

Each side cuts tokens into blocks the size of the (single) KV cache group's blocks, names them
with the engine's key metadata, and talks to the store through one client behind a
`PoolGuard` (which bypasses the pool while the store is down).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend import create_backend
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import Backend
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.config_data import (
    AscendStoreConfig,
    ChunkedTokenDatabase,
    KeyMetadata,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_guard import PoolGuard
from vllm_ascend.distributed.kv_transfer.utils.scheduler_inputs import single_group_block_size

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.kv_cache_interface import KVCacheConfig

__all__ = ["PoolClient", "check_single_group", "open_pool"]


def check_single_group(kv_cache_config: KVCacheConfig) -> int:
    """The block size of a KV cache with one group whose hash blocks equal its blocks.

    Raises:
        ValueError: several KV cache groups, or hash blocks of another size.
    """
    return single_group_block_size(kv_cache_config, "AscendStoreConnector")


@dataclass(frozen=True)
class PoolClient:
    """One side's view of the pool: `block_size` tokens per key, the key names (`db`), the
    store client (`backend`) and its guard."""

    block_size: int
    db: ChunkedTokenDatabase
    backend: Backend
    guard: PoolGuard


def open_pool(
    vllm_config: VllmConfig,
    kv_cache_config: KVCacheConfig,
    config: AscendStoreConfig,
    backend: Backend | None,
    *,
    side: str,
    lookup_only: bool,
) -> PoolClient:
    """Connect one side to the pool.

    Args:
        backend: a connected store client, or None to connect one from `config`.
        side: names the side in the guard's log lines.
        lookup_only: the client only answers `exists` (the scheduler side).

    Raises:
        ValueError: an unsupported KV cache layout or an invalid store config.
        BackendError: the store cannot be reached or set up.
    """
    block_size = check_single_group(kv_cache_config)
    keys = KeyMetadata.from_vllm_config(vllm_config, kv_cache_config, block_size, config.namespace)
    client = backend or create_backend(
        config.backend, config.backend_config, vllm_config.parallel_config, lookup_only=lookup_only
    )
    guard = PoolGuard(client, config.retry_interval_s, config.error_log_interval_s, side)
    return PoolClient(block_size, ChunkedTokenDatabase(keys, block_size), client, guard)
