"""Backends of the KV pool: clients of the distributed stores that hold KV cache blocks.

- `Backend` (`backend.py`): the abstract contract (raw addresses, bytes, per-key codes).
- `MooncakeBackend` (`mooncake_backend.py`): Mooncake store (`mooncake-transfer-engine`).
- `MemcacheBackend` (`memcache_backend.py`): MemCache (`memcache-hybrid`).
- `_store_client.py`: what those two share (settings from inline config or a JSON file, the
  `exists`/`register_buffer` checks, the TCP liveness probe, `close`).

The names are resolved lazily (PEP 562), so importing this package needs neither store's
package; `backend_class(name)` maps the `kv_connector_extra_config["backend"]` value to a class.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm.config import ParallelConfig

    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import (
        Backend,
        BackendError,
    )
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.memcache_backend import (  # noqa: E501
        MemcacheBackend,
    )
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.mooncake_backend import (  # noqa: E501
        MooncakeBackend,
    )

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "MemcacheBackend",
    "MooncakeBackend",
    "backend_class",
    "create_backend",
]

_PACKAGE = __name__
# name in kv_connector_extra_config["backend"] -> (module, class)
BACKENDS: dict[str, tuple[str, str]] = {
    "mooncake": ("mooncake_backend", "MooncakeBackend"),
    "memcache": ("memcache_backend", "MemcacheBackend"),
}
_LAZY = {
    "Backend": "backend",
    "BackendError": "backend",
    "MooncakeBackend": "mooncake_backend",
    "MemcacheBackend": "memcache_backend",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {_PACKAGE!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{_PACKAGE}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def backend_class(name: str) -> type[Backend]:
    """The backend class registered under `name` (case-insensitive).

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    entry = BACKENDS.get(str(name).lower())
    if entry is None:
        raise ValueError(f"unknown KV pool backend {name!r}; known: {sorted(BACKENDS)}")
    module, cls_name = entry
    cls: type[Backend] = getattr(importlib.import_module(f"{_PACKAGE}.{module}"), cls_name)
    return cls


def create_backend(
    name: str,
    config: Mapping[str, Any] | None,
    parallel_config: ParallelConfig | None = None,
    *,
    lookup_only: bool = False,
) -> Backend:
    """Connect a backend by name.

    Args:
        name: `"mooncake"` or `"memcache"`.
        config: the store settings (`kv_connector_extra_config[name]`), or None to read the
            backend's configuration file named by its environment variable.
        parallel_config: the engine's parallel config.
        lookup_only: a client that only answers `exists` (the scheduler side).

    Raises:
        ValueError: unknown name or invalid settings.
        ImportError: the store's package is missing.
        BackendError: the store cannot be reached or set up.
    """
    cls: Any = backend_class(name)
    backend: Backend = cls(parallel_config, config, lookup_only=lookup_only)
    return backend
