"""`MooncakeBackend`: the KV pool on a Mooncake store (`mooncake.store.MooncakeDistributedStore`).

Every engine worker runs one client that contributes `global_segment_size` bytes of its memory
to the pool; a `mooncake_master` keeps the metadata. Blocks move zero-copy between the KV cache
and the pool (`batch_put_from`/`batch_get_into` for one segment per key,
`batch_put_from_multi_buffers`/`batch_get_into_multi_buffers` for several): the local staging
buffer (`local_buffer_size`) is not used by this backend.

Configuration (`MooncakeStoreConfig`), from `kv_connector_extra_config["mooncake"]` or, when
that is absent, from the JSON file named by the environment variable `MOONCAKE_CONFIG_PATH`:

| key | default | meaning |
|---|---|---|
| `master_server_address` | required | the master's RPC address, `"host:port"` |
| `local_hostname` | `"127.0.0.1"` | address this client is reached at by other clients |
| `metadata_server` | `"P2PHANDSHAKE"` | or an `http(s)://`, `etcd://`, `redis://` URL |
| `protocol` | `"tcp"` | transfer protocol (`"tcp"`, `"rdma"`, `"ascend"`, ...) |
| `device_name` | `""` | RDMA device list for `"rdma"` |
| `global_segment_size` | `"1GB"` | bytes contributed to the pool: 0 or at least 16MB |
| `local_buffer_size` | `"16MB"` | Mooncake's staging buffer for its copying API, bytes |
| `replica_num` | `1` | copies of each block |
| `prefer_local_segment` | `false` | place new blocks in this client's own segment first |
| `connect_timeout_s` | `3.0` | bound on the master probe before `setup`, seconds |

Facts this module relies on (Mooncake 0.3.13, measured in the project notes): data calls
return codes, never raise; `setup` against a closed master port retries for about 90 s (so
the master is probed first); an unknown `metadata_server` scheme aborts the whole process
(so it is validated first); `put` of an existing key keeps the old value and returns 0.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend._store_client import (
    StoreClientBackend,
    StoreSettings,
    check_setting_keys,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import (
    BackendError,
    parse_byte_size,
    split_host_port,
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


@dataclass(frozen=True)
class MooncakeStoreConfig(StoreSettings, key="mooncake", label="Mooncake", env=CONFIG_PATH_ENV):
    """Validated settings of one Mooncake store client (keys and defaults: module docstring)."""

    master_server_address: str
    local_hostname: str = "127.0.0.1"
    metadata_server: str = "P2PHANDSHAKE"
    protocol: str = "tcp"
    device_name: str = ""
    global_segment_size: int = 1 << 30
    local_buffer_size: int = 16 << 20
    replica_num: int = 1
    prefer_local_segment: bool = False
    connect_timeout_s: float = 3.0

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], source: str = "mooncake config"
    ) -> MooncakeStoreConfig:
        """Parse and validate a mapping (JSON object).

        Args:
            data: the raw settings.
            source: where they came from, for error messages.

        Raises:
            ValueError: unknown keys (the valid ones are listed), a missing
                `master_server_address`, or a value of the wrong type or range (the message
                names the field and the value).
        """
        check_setting_keys(data, source, [f.name for f in fields(cls)])
        if "master_server_address" not in data:
            raise ValueError(f"{source}: 'master_server_address' is required ('host:port')")
        split_host_port(f"{source}: master_server_address", data["master_server_address"])
        strings: dict[str, Any] = {}
        for key in ("local_hostname", "metadata_server", "protocol", "device_name"):
            if key in data:
                value = data[key]
                if not isinstance(value, str) or (key != "device_name" and not value.strip()):
                    raise ValueError(f"{source}: {key} must be a non-empty string, got {value!r}")
                strings[key] = value.strip()
        metadata = strings.get("metadata_server", cls.metadata_server)
        if metadata != "P2PHANDSHAKE" and not metadata.startswith(_METADATA_SCHEMES):
            # Mooncake aborts the process (glog FATAL) on an unknown scheme.
            raise ValueError(
                f"{source}: metadata_server must be 'P2PHANDSHAKE' or a URL starting with "
                f"{', '.join(_METADATA_SCHEMES)}; got {metadata!r}"
            )
        sizes: dict[str, Any] = {
            key: parse_byte_size(f"{source}: {key}", data[key])
            for key in ("global_segment_size", "local_buffer_size")
            if key in data
        }
        segment = sizes.get("global_segment_size", cls.global_segment_size)
        if 0 < segment < MIN_SEGMENT_BYTES:
            # Mooncake refuses smaller segments in setup ("Total size must be at least ...").
            raise ValueError(
                f"{source}: global_segment_size={data['global_segment_size']!r} is below "
                f"Mooncake's minimum of {MIN_SEGMENT_BYTES} bytes (16MB); use 0 for a client "
                "that contributes no memory"
            )
        replica_num = data.get("replica_num", cls.replica_num)
        if isinstance(replica_num, bool) or not isinstance(replica_num, int) or replica_num < 1:
            raise ValueError(f"{source}: replica_num must be an integer >= 1, got {replica_num!r}")
        prefer_local = data.get("prefer_local_segment", cls.prefer_local_segment)
        if not isinstance(prefer_local, bool):
            raise ValueError(f"{source}: prefer_local_segment must be true or false")
        timeout = data.get("connect_timeout_s", cls.connect_timeout_s)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"{source}: connect_timeout_s must be a positive number of seconds")
        return cls(
            master_server_address=str(data["master_server_address"]).strip(),
            **strings,
            **sizes,
            replica_num=replica_num,
            prefer_local_segment=prefer_local,
            connect_timeout_s=float(timeout),
        )


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
