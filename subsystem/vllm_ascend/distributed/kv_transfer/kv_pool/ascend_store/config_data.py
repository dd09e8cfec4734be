"""Configuration, pool keys and the metadata the KV pool's scheduler side sends its workers.

- `AscendStoreConfig`: the connector's `kv_connector_extra_config`, validated once.
- `KeyMetadata` + `ChunkedTokenDatabase`: a prompt is cut into chunks of one KV cache block
  (`block_size` tokens); each full chunk gets one pool key per worker:
  `"<namespace>/<fingerprint>/tp<r>-pp<p>/<block hash hex>"`. The block hash is vLLM's chained
  hash of the chunk and every token before it (`Request.block_hashes`), so a key names a whole
  prefix. The namespace defaults to the model name and the fingerprint digests what fixes the
  bytes of a block (model, dtype, block size, bytes per block, TP/PP sizes): two engines serving
  the same model with the same layout share keys, different models never do.
- `ReqMeta`, `AscendConnectorMetadata`: one step's loads and saves, per request; they live in
  `step_metadata.py` and are re-exported here under upstream's module name.

Extra config keys (all optional; unknown keys are errors): the `setting` fields of
`AscendStoreConfig`, each with its default and meaning (the table in README.md is rendered from
them by `config_table`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.step_metadata import (
    AscendConnectorMetadata,
    ReqMeta,
)
from vllm_ascend.distributed.kv_transfer.utils.extra_config import (
    ExtraConfigSource,
    boolean,
    one_of,
    parse,
    positive,
    setting,
    text,
)
from vllm_ascend.distributed.kv_transfer.utils.scheduler_inputs import bytes_per_block

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.kv_cache_interface import KVCacheConfig

__all__ = [
    "AscendConnectorMetadata",
    "AscendStoreConfig",
    "ChunkedTokenDatabase",
    "KeyMetadata",
    "ReqMeta",
    "bytes_per_block",
]

_BACKENDS = ("mooncake", "memcache")
_SOURCE = ExtraConfigSource("AscendStoreConnector")
_COUNT = positive(integer=True)
_SECONDS = positive()
_STORE_DOC = (
    "the %s store client's settings (its table below); checked by the backend when it connects"
)


def _store_settings(label: str, value: Any, values: Mapping[str, Any]) -> Any:
    # Only the chosen backend's entry must be an object (`validate`); a copy, so that a caller
    # changing its dict later does not change the config.
    return dict(value) if isinstance(value, Mapping) else value


@dataclass(frozen=True)
class AscendStoreConfig:
    """Validated `kv_connector_extra_config` of the AscendStoreConnector (keys: the fields)."""

    backend: str = setting(
        '`"mooncake"` or `"memcache"` (any case)',
        one_of(list(_BACKENDS), fold_case=True),
        default="mooncake",
    )
    mooncake: Mapping[str, Any] | None = setting(
        _STORE_DOC % "Mooncake",
        _store_settings,
        default=None,
        default_doc="the JSON file `$MOONCAKE_CONFIG_PATH` names",
    )
    memcache: Mapping[str, Any] | None = setting(
        _STORE_DOC % "MemCache",
        _store_settings,
        default=None,
        default_doc="the JSON file `$MEMCACHE_CONFIG_PATH` names",
    )
    load_async: bool = setting(
        "load hits in the background, the request waiting outside the batch, instead of before "
        "the step's forward pass",
        boolean,
        default=False,
    )
    namespace: str | None = setting(
        "key prefix; engines that should share entries must agree",
        text(strip=True, nonempty=True),
        default=None,
        none_is_absent=True,
        default_doc="the model name",
    )
    save_queue_size: int = setting(
        "bound on queued save tasks per worker; a full queue drops the save", _COUNT, default=64
    )
    load_queue_size: int = setting(
        "bound on queued load tasks per worker; a full queue fails the load", _COUNT, default=64
    )
    transfer_batch_keys: int = setting("keys per store call", _COUNT, default=64)
    load_timeout_s: float = setting(
        "deadline of an asynchronous load, seconds from when the worker queues it; a load still "
        "running then ends as a load failure (`kv_load_failure_policy` applies)",
        _SECONDS,
        default=30.0,
    )
    sync_load_timeout_s: float = setting(
        "the longest an engine step waits for its synchronous loads (`load_async` false), "
        "seconds; blocks not loaded by then fail as load errors (`kv_load_failure_policy` "
        "applies: recomputed), and the request keeps its blocks until the store call returns",
        _SECONDS,
        default=2.0,
    )
    lookup_timeout_s: float = setting(
        "the longest an engine step waits for the pool's answer to which blocks it holds, "
        "seconds; a lookup past it is a miss and the pool counts as lost until a call is "
        "answered (later lookups are misses at once while that one is stuck)",
        _SECONDS,
        default=0.5,
    )
    failed_load_ttl_s: float = setting(
        "a block whose load failed is answered as a miss, without asking the store, for this "
        "many seconds (a silent host's keys stay listed until the store forgets the host: "
        "Mooncake's `--client_ttl`, default 10 s); then it is looked up again",
        _SECONDS,
        default=10.0,
    )
    error_log_interval_s: float = setting(
        "at most one pool-error log line per kind per interval, seconds", _SECONDS, default=10.0
    )
    retry_interval_s: float = setting(
        "after a store failure the pool is bypassed this long, then probed, seconds",
        _SECONDS,
        default=5.0,
    )
    shutdown_timeout_s: float = setting(
        "bound on draining queued saves at shutdown or preemption, seconds",
        _SECONDS,
        default=30.0,
    )

    @property
    def backend_config(self) -> Mapping[str, Any] | None:
        """The chosen backend's settings, or None to read its JSON file."""
        return self.mooncake if self.backend == "mooncake" else self.memcache

    @classmethod
    def from_extra_config(cls, extra: Mapping[str, Any] | None) -> AscendStoreConfig:
        """Parse and validate the connector's extra config (raises `ValueError`: see `parse`)."""
        return parse(cls, extra or {}, _SOURCE)

    def validate(self) -> None:
        """Check that the chosen backend's settings, when given, are an object (by `parse`).

        Raises:
            ValueError: they are not.
        """
        settings = self.backend_config
        if settings is not None and not isinstance(settings, Mapping):
            raise ValueError(
                f"kv_connector_extra_config[{self.backend!r}] must be an object, "
                f"got {type(settings).__name__}"
            )


@dataclass(frozen=True)
class KeyMetadata:
    """What a pool key is derived from besides the block hash.

    Attributes:
        namespace: the model's name (or the configured namespace), readable in the store.
        fingerprint: 16 hex digits digesting the model and the block layout.
        tp_size: tensor-parallel size (each TP rank stores its own slice of a block).
        pp_size: pipeline-parallel size (each PP rank stores its own layers).
    """

    namespace: str
    fingerprint: str
    tp_size: int = 1
    pp_size: int = 1

    @classmethod
    def from_vllm_config(
        cls,
        vllm_config: VllmConfig,
        kv_cache_config: KVCacheConfig,
        block_size: int,
        namespace: str | None = None,
    ) -> KeyMetadata:
        """Derive the key metadata of an engine (the same on its scheduler and workers)."""
        model = vllm_config.model_config
        parallel = vllm_config.parallel_config
        cache = vllm_config.cache_config
        layout = {
            # A configured namespace stands for the model: engines that load the same weights
            # from different paths can then share entries.
            "model": namespace or model.model,
            "revision": None if namespace else getattr(model, "revision", None),
            "dtype": str(model.dtype),
            "kv_cache_dtype": str(cache.cache_dtype),
            "block_size": block_size,
            "bytes_per_block": bytes_per_block(kv_cache_config),
            "tp": parallel.tensor_parallel_size,
            "pp": parallel.pipeline_parallel_size,
        }
        digest = hashlib.sha256(json.dumps(layout, sort_keys=True).encode()).hexdigest()[:16]
        name = namespace or model.served_model_name or model.model
        if isinstance(name, (list, tuple)):
            name = name[0]
        return cls(
            namespace=_safe(str(name)),
            fingerprint=digest,
            tp_size=parallel.tensor_parallel_size,
            pp_size=parallel.pipeline_parallel_size,
        )

    def ranks(self) -> list[tuple[int, int]]:
        """Every `(tp_rank, pp_rank)` of the engine, in key order."""
        return [(t, p) for p in range(self.pp_size) for t in range(self.tp_size)]

    def prefix(self, tp_rank: int, pp_rank: int) -> str:
        return f"{self.namespace}/{self.fingerprint}/tp{tp_rank}-pp{pp_rank}/"


def _safe(name: str) -> str:
    # Keys travel through stores that dislike spaces and path separators in odd places.
    cleaned = "".join(c if c.isalnum() or c in "-_.:" else "_" for c in name.strip("/"))
    return cleaned[-64:] or "model"


class ChunkedTokenDatabase:
    """Cuts token sequences into block-sized chunks and names each full chunk in the pool.

    Args:
        metadata: the engine's key metadata.
        block_size: tokens per chunk (= tokens per KV cache block).
    """

    def __init__(self, metadata: KeyMetadata, block_size: int) -> None:
        if block_size <= 0:
            raise ValueError(f"block_size must be positive, got {block_size}")
        self.metadata = metadata
        self.block_size = block_size

    def num_full_chunks(self, num_tokens: int) -> int:
        """Chunks of `block_size` tokens that are complete in `num_tokens` tokens."""
        return max(num_tokens, 0) // self.block_size

    def chunk_ranges(self, num_tokens: int) -> list[tuple[int, int]]:
        """`(start, end)` token offsets of each full chunk."""
        bs = self.block_size
        return [(i * bs, (i + 1) * bs) for i in range(self.num_full_chunks(num_tokens))]

    def keys(self, block_hashes: Sequence[bytes], tp_rank: int, pp_rank: int) -> list[str]:
        """One worker's key for each block hash."""
        prefix = self.metadata.prefix(tp_rank, pp_rank)
        return [prefix + bytes(h).hex() for h in block_hashes]

    def keys_all_ranks(self, block_hashes: Sequence[bytes]) -> list[str]:
        """Every worker's key of each block, block-major: `len(ranks)` keys per block."""
        prefixes = [self.metadata.prefix(t, p) for t, p in self.metadata.ranks()]
        return [prefix + bytes(h).hex() for h in block_hashes for prefix in prefixes]

    def process_tokens(
        self, num_tokens: int, block_hashes: Sequence[bytes], tp_rank: int, pp_rank: int
    ) -> Iterator[tuple[int, int, str]]:
        """Yield `(start, end, key)` for each full chunk that has a block hash."""
        ranges = self.chunk_ranges(num_tokens)[: len(block_hashes)]
        keys = self.keys(block_hashes[: len(ranges)], tp_rank, pp_rank)
        for (start, end), key in zip(ranges, keys, strict=True):
            yield start, end, key
