"""Plumbing shared by the backends that wrap a networked store client (`MooncakeBackend`,
`MemcacheBackend`); the `Backend` contract itself is in `backend.py`.

- `read_store_settings`: a store's raw settings from its entry in `kv_connector_extra_config`
  or, when that is absent, from the JSON file named by an environment variable.
- `import_store_module`: a store's Python binding, or an `ImportError` saying what to install.
- `StoreClientBackend`: a `Backend` that holds one store client (`_store`) whose service
  listens at a TCP address (`_address`): the probe of that address before connecting, the
  argument check of `register_buffer`, the reading of `batch_is_exist` codes, the dispatch of a
  `put`/`get` batch to the store's one-segment or several-segment call, the liveness probe and
  an idempotent `close`.
"""

from __future__ import annotations

import importlib
import json
import os
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from typing_extensions import Self

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import (
    Backend,
    BackendError,
    probe_tcp,
    single_segments,
)

if TYPE_CHECKING:
    from vllm.config import ParallelConfig

__all__ = [
    "StoreClientBackend",
    "StoreSettings",
    "import_store_module",
    "read_store_settings",
]

# A store's batch call: `(keys, addresses, sizes) -> per-key codes`, with one address and size
# per key (flat lists) or a list of them per key (several segments).
SingleSegmentCall = Callable[[list[str], list[int], list[int]], Sequence[int]]
MultiSegmentCall = Callable[[list[str], list[list[int]], list[list[int]]], Sequence[int]]


def read_store_settings(
    inline: Mapping[str, Any] | None, *, key: str, store: str, env: str
) -> tuple[Mapping[str, Any], str]:
    """The raw settings of a store and where they came from (for error messages).

    Args:
        inline: `kv_connector_extra_config[key]`, or None when absent.
        key: that entry's name (`"mooncake"`, `"memcache"`).
        store: the store's name in messages (`"Mooncake"`, `"MemCache"`).
        env: the environment variable naming a JSON file, read when `inline` is None.

    Returns:
        `(settings, source)`: `inline` with `"kv_connector_extra_config['<key>']"`, or the
        file's JSON with `"$<env>=<path>"`.

    Raises:
        ValueError: neither is given, or the file cannot be read or parsed.
    """
    if inline is not None:
        return inline, f"kv_connector_extra_config[{key!r}]"
    path = os.environ.get(env)
    if not path:
        raise ValueError(
            f"no {store} store config: set kv_connector_extra_config[{key!r}] or "
            f"${env} to a JSON file"
        )
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"${env}={path}: cannot read the JSON: {exc}") from None
    return data, f"${env}={path}"


class StoreSettings:
    """Mixin of a store's settings class: `load` them from the connector's extra config or the
    store's JSON file. The class names, as class keywords, its entry (`key`), the store
    (`label`, for messages) and the environment variable (`env`), and parses with
    `from_mapping`.
    """

    settings_key: ClassVar[str]
    store_label: ClassVar[str]
    config_env: ClassVar[str]

    def __init_subclass__(cls, *, key: str, label: str, env: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.settings_key, cls.store_label, cls.config_env = key, label, env

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str) -> Self:
        raise NotImplementedError

    @classmethod
    def load(cls, inline: Mapping[str, Any] | None) -> Self:
        """The settings from `inline` (the store's entry of the connector's extra config) or,
        when that is None, from the JSON file named by `$<config_env>`.

        Raises:
            ValueError: neither is given, the file cannot be read or parsed, or a value is
                invalid.
        """
        data, source = read_store_settings(
            inline, key=cls.settings_key, store=cls.store_label, env=cls.config_env
        )
        return cls.from_mapping(data, source)


def import_store_module(name: str, missing: str) -> ModuleType:
    """Import a store's Python binding.

    Raises:
        ImportError: the module is missing; the message is `missing` (what to install).
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(missing) from exc


class StoreClientBackend(Backend):
    """A `Backend` around one store client reached over TCP.

    Args:
        parallel_config: the engine's parallel config (the `Backend` signature).
        config: the store's settings: its config object, a mapping to validate, or None to
            read the JSON file its environment variable names.
        lookup_only: a client that only answers `exists` (the scheduler side): it contributes
            no memory to the pool.

    Subclasses name their binding (`module_name`, `missing_hint`) and, in `_connect`, set
    `config`, `_store` (the client object, with a `close()`) and, through `_probe_service`,
    `_address` (the `(host, port)` its service listens at).

    Raises:
        ImportError: the binding is missing.
    """

    #: The store's name in error messages (`"Mooncake"`, `"MemCache"`).
    store_name: ClassVar[str] = "store"

    _store: Any
    _address: tuple[str, int]
    _service: str  # the service the store asks, for messages (`"master host:port"`)

    #: The store's Python binding, imported as `self._module`, and the `ImportError` message
    #: when it is missing (what to install).
    module_name: ClassVar[str]
    missing_hint: ClassVar[str]

    def __init__(
        self,
        parallel_config: ParallelConfig | None = None,
        config: Any = None,
        *,
        lookup_only: bool = False,
    ) -> None:
        super().__init__(parallel_config)
        self.lookup_only = lookup_only
        self._closed = False
        self._module = import_store_module(self.module_name, self.missing_hint)
        self._connect(config)

    @abstractmethod
    def _connect(self, config: Any) -> None:
        """Validate `config` (a config object, a mapping, or None for the store's JSON file),
        set `self.config`, and open `self._store`."""

    def _probe_service(
        self, field: str, url: str, address: tuple[str, int], timeout_s: float, service: str
    ) -> None:
        """Remember the service's `address` (and its name `service` for messages, e.g.
        `"master host:port"`), after checking that something listens there.

        Stores retry a dead address for a long time inside their own setup; a refused connect
        here costs microseconds.

        Raises:
            BackendError: nothing listens at `address` (the message names `field=url`).
        """
        reason = probe_tcp(*address, timeout_s)
        if reason is not None:
            raise BackendError(f"{self.store_name} {field}={url}: cannot connect ({reason})")
        self._address = address
        self._service = service

    @staticmethod
    def _check_buffers(ptrs: Sequence[int], lengths: Sequence[int]) -> None:
        """Validate `register_buffer` arguments: as many lengths as pointers, all positive.

        Raises:
            ValueError: otherwise.
        """
        if len(ptrs) != len(lengths) or any(n <= 0 for n in lengths):
            raise ValueError(f"register_buffer: {len(ptrs)} pointers, lengths {list(lengths)}")

    def _register_each(
        self, ptrs: Sequence[int], lengths: Sequence[int], register: Callable[[int, int], int]
    ) -> None:
        """`register_buffer` through the store's one-buffer call `register(ptr, length) -> code`.

        Raises:
            ValueError: malformed arguments (`_check_buffers`).
            BackendError: a call returned a non-zero code (the message names the buffer).
        """
        self._check_buffers(ptrs, lengths)
        for ptr, length in zip(ptrs, lengths, strict=True):
            rc = register(ptr, length)
            if rc != 0:
                raise BackendError(
                    f"{self.store_name} register_buffer({ptr:#x}, {length}) failed: "
                    f"{self._code_name(rc)}",
                    rc,
                )

    def _code_name(self, code: int) -> str:
        """A store return code as shown in messages (default: `"code N"`)."""
        return f"code {code}"

    def _presence(self, codes: Sequence[int], keys: Sequence[str], service: str) -> list[int]:
        """`exists` results (1 present, 0 absent) from `batch_is_exist` codes (> 0 present,
        0 absent, < 0 failed).

        Args:
            codes: one code per key.
            keys: the keys asked about.
            service: the service the store asked, for the error (`"master host:port"`).

        Raises:
            BackendError: any code is negative: the call failed as a whole.
        """
        results = [int(r) for r in codes]
        bad = [r for r in results if r < 0]
        if bad:
            raise BackendError(
                f"{self.store_name} batch_is_exist failed for {len(bad)} of {len(keys)} keys "
                f"(code {bad[0]}), {service}",
                bad[0],
            )
        return [1 if r > 0 else 0 for r in results]

    @staticmethod
    def _batch(
        keys: Sequence[str],
        addrs: Sequence[Sequence[int]],
        sizes: Sequence[Sequence[int]],
        single: SingleSegmentCall,
        multi: MultiSegmentCall,
    ) -> list[int]:
        """Run a `put`/`get` batch through `single` when every key has one segment, else
        through `multi`; the store's per-key codes as ints (empty for no keys).

        Raises:
            ValueError: malformed arguments (`backend.check_batch`).
        """
        flat = single_segments(keys, addrs, sizes)
        if not keys:
            return []
        if flat is not None:
            results = single(list(keys), flat[0], flat[1])
        else:
            results = multi(list(keys), [list(a) for a in addrs], [list(s) for s in sizes])
        return [int(r) for r in results]

    def exists(self, keys: Sequence[str]) -> list[int]:
        if not keys:
            return []
        return self._presence(self._store.batch_is_exist(list(keys)), keys, self._service)

    @property
    def service(self) -> str:
        return getattr(self, "_service", self.name)

    def is_reachable(self) -> bool:
        return probe_tcp(*self._address, timeout_s=0.5) is None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._store.close()
