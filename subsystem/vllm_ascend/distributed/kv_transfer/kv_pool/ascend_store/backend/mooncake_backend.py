"""`MooncakeBackend`: the KV pool on a Mooncake store (`mooncake.store.MooncakeDistributedStore`).

Every engine worker runs one client that contributes `global_segment_size` bytes of its memory
to the pool; a `mooncake_master` keeps the metadata. Blocks move zero-copy between the KV cache
and the pool (`batch_put_from`/`batch_get_into` for one segment per key,
`batch_put_from_multi_buffers`/`batch_get_into_multi_buffers` for several): the local staging
buffer (`local_buffer_size`) is not used by this backend.

Configuration (`MooncakeStoreConfig`), from `kv_connector_extra_config["mooncake"]` or, when
that is absent, from the JSON file named by the environment variable `MOONCAKE_CONFIG_PATH`:
its `setting` fields, each with its default and meaning (the table in README.md is rendered
from them by `config_table`).

Facts this module relies on (Mooncake 0.3.13, measured in the project notes): data calls
return codes, never raise; `setup` against a closed master port retries for about 90 s (so
the master is probed first); an unknown `metadata_server` scheme aborts the whole process
(so it is validated first); `put` of an existing key keeps the old value and returns 0.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend._store_client import (
    StoreClientBackend,
    StoreSettings,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import (
    BackendError,
    parse_byte_size,
    split_host_port,
)
from vllm_ascend.distributed.kv_transfer.utils.extra_config import (
    SettingsSource,
    boolean,
    parse,
    plain,
    positive,
    setting,
    text,
)

__all__ = [
    "CONFIG_PATH_ENV",
    "MIN_SEGMENT_BYTES",
    "MooncakeBackend",
    "MooncakeStoreConfig",
    "mooncake_error_name",
]

CONFIG_PATH_ENV = "MOONCAKE_CONFIG_PATH"
# Smallest segment Mooncake 0.3.13 mounts; 0 (no memory contributed) is allowed too.
MIN_SEGMENT_BYTES = 16 << 20

# Mooncake ErrorCode values (mooncake-store/include/types.h) that this module names in logs.
_ERROR_NAMES = {
    -1: "INTERNAL_ERROR",
    -200: "NO_AVAILABLE_HANDLE (pool full)",
    -600: "INVALID_PARAMS",
    -704: "OBJECT_NOT_FOUND",
    -705: "OBJECT_ALREADY_EXISTS",
    -706: "OBJECT_HAS_LEASE",
    -800: "TRANSFER_FAIL",
    -900: "RPC_FAIL",
}
# Codes that mean the master (not one key) is unreachable: the call failed as a whole.
_UNREACHABLE = frozenset({-900})
_METADATA_SCHEMES = ("http://", "https://", "etcd://", "redis://")


def mooncake_error_name(code: int) -> str:
    """`"-200 NO_AVAILABLE_HANDLE (pool full)"` style text for a Mooncake return code."""
    return f"{code} {_ERROR_NAMES.get(code, 'error')}"


def _physical_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _master_address(label: str, value: Any, values: Mapping[str, Any]) -> str:
    split_host_port(label, value)
    return str(value).strip()


_NAME = text(strip=True, nonempty=True)


def _metadata_server(label: str, value: Any, values: Mapping[str, Any]) -> str:
    server = _NAME(label, value, values)
    if server != "P2PHANDSHAKE" and not server.startswith(_METADATA_SCHEMES):
        # Mooncake aborts the process (glog FATAL) on an unknown scheme.
        raise ValueError(
            f"{label} must be 'P2PHANDSHAKE' or a URL starting with "
            f"{', '.join(_METADATA_SCHEMES)}; got {server!r}"
        )
    return server


def _segment_size(label: str, value: Any, values: Mapping[str, Any]) -> int:
    size = parse_byte_size(label, value)
    if 0 < size < MIN_SEGMENT_BYTES:
        # Mooncake refuses smaller segments in setup ("Total size must be at least ...").
        raise ValueError(
            f"{label}={value!r} is below Mooncake's minimum of {MIN_SEGMENT_BYTES} bytes "
            "(16MB); use 0 for a client that contributes no memory"
        )
    return size


@dataclass(frozen=True)
class MooncakeStoreConfig(StoreSettings, key="mooncake", label="Mooncake", env=CONFIG_PATH_ENV):
    """Validated settings of one Mooncake store client (keys and defaults: the fields)."""

    master_server_address: str = setting(
        'the master\'s RPC address, `"host:port"`', _master_address, required="'host:port'"
    )
    local_hostname: str = setting(
        "address this client is reached at by other clients", _NAME, default="127.0.0.1"
    )
    metadata_server: str = setting(
        '`"P2PHANDSHAKE"` or an `http(s)://`, `etcd://`, `redis://` URL',
        _metadata_server,
        default="P2PHANDSHAKE",
    )
    protocol: str = setting(
        'transfer protocol (`"tcp"`, `"rdma"`, `"ascend"`, ...)', _NAME, default="tcp"
    )
    device_name: str = setting('RDMA device list for `"rdma"`', text(strip=True), default="")
    global_segment_size: int = setting(
        "memory contributed to the pool, a size: 0 or at least 16MB",
        _segment_size,
        default=1 << 30,
        default_doc='`"1GB"`',
    )
    local_buffer_size: int = setting(
        "Mooncake's staging buffer for its copying API, a size",
        plain(parse_byte_size),
        default=16 << 20,
        default_doc='`"16MB"`',
    )
    replica_num: int = setting(
        "copies of each block (integer > 0)", positive(integer=True), default=1
    )
    prefer_local_segment: bool = setting(
        "place new blocks in this client's own segment first", boolean, default=False
    )
    connect_timeout_s: float = setting(
        "bound on the master probe before `setup`, seconds (> 0)", positive(), default=3.0
    )

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], source: str = "mooncake config"
    ) -> MooncakeStoreConfig:
        """Parse and validate a mapping (JSON object) that came from `source` (for errors).

        Raises:
            ValueError: as `parse` (a missing `master_server_address` included).
        """
        return parse(cls, data, SettingsSource(source))


class MooncakeBackend(StoreClientBackend):
    """A Mooncake store client (see the module docstring for the configuration).

    Args:
        parallel_config: the engine's parallel config (unused by Mooncake, kept for the
            `Backend` signature).
        config: a `MooncakeStoreConfig`, a mapping to validate, or None to read
            `$MOONCAKE_CONFIG_PATH`.
        lookup_only: a client that only answers `exists` (the scheduler side): it contributes
            no memory to the pool.

    Raises:
        ImportError: the `mooncake` package is missing.
        ValueError: an invalid configuration, or a segment larger than this host's memory.
        BackendError: nothing listens at `master_server_address`, or `setup` failed.
    """

    name = "mooncake"
    store_name = "Mooncake"

    module_name = "mooncake.store"
    missing_hint = (
        "MooncakeBackend needs Mooncake: pip install mooncake-transfer-engine "
        "(mooncake-transfer-engine-non-cuda on CPU/NPU hosts)"
    )

    def _connect(self, config: MooncakeStoreConfig | Mapping[str, Any] | None) -> None:
        if not isinstance(config, MooncakeStoreConfig):
            config = MooncakeStoreConfig.load(config)
        self.config = config
        lookup_only = self.lookup_only
        mooncake = self._module
        segment = 0 if lookup_only else config.global_segment_size
        memory = _physical_memory_bytes()
        if memory is not None and segment > memory:
            raise ValueError(
                f"global_segment_size={segment} bytes is more than this host's memory "
                f"({memory} bytes); master {config.master_server_address}"
            )
        self._probe_service(
            "master_server_address",
            config.master_server_address,
            split_host_port("master_server_address", config.master_server_address),
            config.connect_timeout_s,
            f"master {config.master_server_address}",
        )
        store = mooncake.MooncakeDistributedStore()
        rc = store.setup(
            config.local_hostname,
            config.metadata_server,
            segment,
            0 if lookup_only else config.local_buffer_size,
            config.protocol,
            config.device_name,
            config.master_server_address,
        )
        if rc != 0:
            raise BackendError(
                f"Mooncake setup failed ({mooncake_error_name(rc)}) with "
                f"global_segment_size={segment}, protocol={config.protocol}, "
                f"master {config.master_server_address}",
                rc,
            )
        self._store = store
        self._replicate = mooncake.ReplicateConfig()
        self._replicate.replica_num = config.replica_num
        if config.prefer_local_segment:
            self._replicate.preferred_segment = store.get_hostname()

    @property
    def store(self) -> Any:
        """The underlying `MooncakeDistributedStore` (for tests and tools)."""
        return self._store

    def register_buffer(self, ptrs: Sequence[int], lengths: Sequence[int]) -> None:
        self._register_each(ptrs, lengths, self._store.register_buffer)

    def _code_name(self, code: int) -> str:
        return mooncake_error_name(code)

    def put(
        self, keys: Sequence[str], addrs: Sequence[Sequence[int]], sizes: Sequence[Sequence[int]]
    ) -> list[int]:
        store, replicate = self._store, self._replicate
        results = self._batch(
            keys,
            addrs,
            sizes,
            lambda k, a, s: store.batch_put_from(k, a, s, replicate),
            lambda k, a, s: store.batch_put_from_multi_buffers(k, a, s, replicate),
        )
        return self._checked("batch_put_from", results)

    def get(
        self, keys: Sequence[str], addrs: Sequence[Sequence[int]], sizes: Sequence[Sequence[int]]
    ) -> list[int]:
        results = self._batch(
            keys, addrs, sizes, self._store.batch_get_into, self._store.batch_get_into_multi_buffers
        )
        return self._checked("batch_get_into", results)

    def _checked(self, op: str, results: Sequence[int]) -> list[int]:
        out = list(results)
        lost = next((r for r in _UNREACHABLE if r in out), None)
        if lost is not None:
            raise BackendError(
                f"Mooncake {op} failed ({mooncake_error_name(lost)}), "
                f"master {self.config.master_server_address}",
                lost,
            )
        return out

    def remove(self, keys: Sequence[str]) -> list[int]:
        """Delete keys even while read leases are held (tests and tools; not part of `Backend`).

        Returns:
            Per key: 0 removed, a negative code otherwise (-704 not found).
        """
        return [int(r) for r in self._store.batch_remove(list(keys), True)]
