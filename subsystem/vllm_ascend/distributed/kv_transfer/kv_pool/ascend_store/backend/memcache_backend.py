"""`MemcacheBackend`: the KV pool on MemCache (`memcache_hybrid.DistributedObjectStore`).

A MemCache deployment has one `MetaService` per host group and one *local service* per engine
worker, which contributes DRAM (`dram_size`) and/or NPU memory (`hbm_size`) to the pool. Blocks
move zero-copy between registered KV cache memory and the pool (`batch_put_from` /
`batch_get_into` for one segment per key, the `*_layers` forms for several), with the copy
direction chosen from where the KV cache lives: device memory (`L2G`/`G2L`) on an NPU, host
memory (`H2G`/`G2H`) otherwise.

Configuration (`MemcacheStoreConfig`), from `kv_connector_extra_config["memcache"]` or, when
that is absent, from the JSON file named by `$MEMCACHE_CONFIG_PATH`:
its `setting` fields, each with its default and meaning (the table in README.md is rendered
from them by `config_table`).

The scheduler side opens a client-only store (`init_bm=False`): it answers `exists` without
contributing memory. A worker's store needs the Ascend driver, CANN and an NPU: `init` fails
on a host without them (`hybm_init`: "the current version of ascend driver does not support
mf!"), which this backend reports as a `BackendError`. Facts measured in the project notes: a
dead MetaService costs `client_timeout_s` per call and leaves the process-wide client broken
(so the MetaService is probed first); `register_buffer` on a client-only store crashes the
process (so it is refused here).
"""

from __future__ import annotations

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
    Convert,
    SettingsSource,
    one_of,
    parse,
    plain,
    positive,
    setting,
)

__all__ = ["CONFIG_PATH_ENV", "MemcacheBackend", "MemcacheStoreConfig"]

CONFIG_PATH_ENV = "MEMCACHE_CONFIG_PATH"
_PROTOCOLS = (
    "host_rdma",
    "host_urma",
    "host_tcp",
    "host_shm",
    "device_rdma",
    "device_urma",
    "device_uboe",
    "device_sdma",
)
_MAX_REPLICAS = 8


def _tcp_url(field: str, value: Any) -> tuple[str, int]:
    if not isinstance(value, str) or not value.startswith("tcp://"):
        raise ValueError(f"{field}: expected 'tcp://host:port', got {value!r}")
    return split_host_port(field, value[len("tcp://") :])


def _url_setting(label: str, value: Any, values: Mapping[str, Any]) -> str:
    _tcp_url(label, value)
    return value


def _device_id(label: str, value: Any, values: Mapping[str, Any]) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{label} must be an integer >= 0, got {value!r}")
    return value


def _optional(doc: str, convert: Convert, default_doc: str = "library default") -> Any:
    # A setting that MemCache picks itself when it is absent or null.
    return setting(doc, convert, default=None, none_is_absent=True, default_doc=default_doc)


_SIZE = plain(parse_byte_size)
_TCP_FORM = "'tcp://host:port'"


@dataclass(frozen=True)
class MemcacheStoreConfig(StoreSettings, key="memcache", label="MemCache", env=CONFIG_PATH_ENV):
    """Validated settings of one MemCache client (keys and defaults: the fields)."""

    meta_service_url: str = setting(
        'the MetaService, `"tcp://host:port"`', _url_setting, required=_TCP_FORM
    )
    config_store_url: str = setting(
        'its config store, `"tcp://host:port"`', _url_setting, required=_TCP_FORM
    )
    hcom_url: str | None = _optional(
        'this client\'s data endpoint (`"tcp://host:port"`)', _url_setting
    )
    protocol: str | None = _optional(
        "`host_rdma`, `host_tcp`, `host_shm`, `device_rdma`, ...", one_of(_PROTOCOLS)
    )
    dram_size: int = setting(
        "host memory contributed to the pool, a size",
        _SIZE,
        default=1 << 30,
        default_doc='`"1GB"`',
    )
    hbm_size: int = setting("NPU memory contributed to the pool, a size", _SIZE, default=0)
    world_size: int | None = _optional(
        "number of local services in the deployment", positive(integer=True)
    )
    device_id: int | None = _optional(
        "the NPU this client binds", _device_id, default_doc="current NPU, else 0"
    )
    replica_num: int = setting(
        f"copies of each block (1..{_MAX_REPLICAS})",
        positive(integer=True, maximum=_MAX_REPLICAS),
        default=1,
    )
    client_timeout_s: int = setting(
        "bound on each MetaService request, seconds", positive(integer=True), default=5
    )

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], source: str = "memcache config"
    ) -> MemcacheStoreConfig:
        """Parse and validate a mapping (JSON object) that came from `source` (for errors).

        Raises:
            ValueError: as `parse` (a missing URL included).
        """
        return parse(cls, data, SettingsSource(source))


def _current_npu() -> int:
    try:
        import torch
        import torch_npu  # noqa: F401  (registers torch.npu)
    except ImportError:
        return 0
    npu = getattr(torch, "npu", None)
    return int(npu.current_device()) if npu is not None and npu.is_available() else 0


class MemcacheBackend(StoreClientBackend):
    """A MemCache client (see the module docstring for the configuration).

    Args:
        parallel_config: the engine's parallel config (kept for the `Backend` signature).
        config: a `MemcacheStoreConfig`, a mapping to validate, or None to read
            `$MEMCACHE_CONFIG_PATH`.
        lookup_only: a client-only store that answers `exists` and contributes no memory.

    Raises:
        ImportError: the `memcache_hybrid` package is missing.
        ValueError: an invalid configuration.
        BackendError: nothing listens at `meta_service_url`, or `setup`/`init` failed (on a
            host without an NPU a worker's `init` always fails; the message says so).
    """

    name = "memcache"
    store_name = "MemCache"

    module_name = "memcache_hybrid"
    missing_hint = "MemcacheBackend needs MemCache: pip install memcache-hybrid"

    def _connect(self, config: MemcacheStoreConfig | Mapping[str, Any] | None) -> None:
        if not isinstance(config, MemcacheStoreConfig):
            config = MemcacheStoreConfig.load(config)
        self.config = config
        lookup_only = self.lookup_only
        mmc = self._module
        self._probe_service(
            "meta_service_url",
            config.meta_service_url,
            _tcp_url("meta_service_url", config.meta_service_url),
            float(config.client_timeout_s),
            f"MetaService {config.meta_service_url}",
        )
        store = mmc.DistributedObjectStore()
        rc = store.setup(self._local_config(mmc, config))
        if rc != 0:
            raise BackendError(f"MemCache setup failed (code {rc})", rc)
        device_id = config.device_id if config.device_id is not None else _current_npu()
        rc = store.init(device_id, not lookup_only)
        if rc != 0:
            hint = (
                ""
                if lookup_only
                else ": a MemCache local service needs the Ascend driver, CANN and an NPU "
                "(hybm_init)"
            )
            raise BackendError(
                f"MemCache init(device_id={device_id}, init_bm={not lookup_only}) failed "
                f"(code {rc}), MetaService {config.meta_service_url}{hint}",
                rc,
            )
        self._store = store
        self._replicate = mmc.ReplicateConfig()
        self._replicate.replicaNum = config.replica_num

    @staticmethod
    def _local_config(mmc: Any, config: MemcacheStoreConfig) -> Any:
        local = mmc.LocalConfig()
        local.meta_service_url = config.meta_service_url
        local.config_store_url = config.config_store_url
        if config.hcom_url is not None:
            local.hcom_url = config.hcom_url
        if config.protocol is not None:
            local.protocol = config.protocol
        # MemCache parses its own size strings; plain digits are bytes.
        local.dram_size = str(config.dram_size)
        local.hbm_size = str(config.hbm_size)
        if config.world_size is not None:
            local.world_size = config.world_size
        local.client_timeout_seconds = config.client_timeout_s
        return local

    def _directions(self) -> tuple[Any, Any]:
        # (put, get) copy types: device memory on an NPU, host memory otherwise.
        on_device = self.device is not None and self.device.type != "cpu"
        mmc = self._module
        return (mmc.L2G, mmc.G2L) if on_device else (mmc.H2G, mmc.G2H)

    def register_buffer(self, ptrs: Sequence[int], lengths: Sequence[int]) -> None:
        if self.lookup_only:
            # The binding crashes the process (SIGSEGV) on a client-only store.
            raise BackendError("MemCache register_buffer needs a worker store, not lookup_only")
        self._register_each(ptrs, lengths, self._store.register_buffer)

    def put(
        self, keys: Sequence[str], addrs: Sequence[Sequence[int]], sizes: Sequence[Sequence[int]]
    ) -> list[int]:
        store, replicate = self._store, self._replicate
        direction, _ = self._directions()
        return self._batch(
            keys,
            addrs,
            sizes,
            lambda k, a, s: store.batch_put_from(k, a, s, direction, replicate),
            lambda k, a, s: store.batch_put_from_layers(k, a, s, direction, replicate),
        )

    def get(
        self, keys: Sequence[str], addrs: Sequence[Sequence[int]], sizes: Sequence[Sequence[int]]
    ) -> list[int]:
        store = self._store
        _, direction = self._directions()
        results = self._batch(
            keys,
            addrs,
            sizes,
            lambda k, a, s: store.batch_get_into(k, a, s, direction),
            lambda k, a, s: store.batch_get_into_layers(k, a, s, direction),
        )
        # The binding does not document its success value (untestable without an NPU): both 0
        # and a byte count are read as success; the Backend contract wants bytes written.
        return [sum(s) if int(r) == 0 else int(r) for r, s in zip(results, sizes, strict=True)]
