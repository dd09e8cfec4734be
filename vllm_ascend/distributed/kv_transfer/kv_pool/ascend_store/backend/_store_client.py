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
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, ClassVar

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import (
    Backend,
    BackendError,
    probe_tcp,
    single_segments,
)

__all__ = ["StoreClientBackend", "import_store_module", "read_store_settings"]

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

    Subclasses set, in `__init__`, `_store` (the client object, with a `close()`),
    `_address` (the `(host, port)` its service listens at) and `_closed = False`.
    """

    #: The store's name in error messages (`"Mooncake"`, `"MemCache"`).
    store_name: ClassVar[str] = "store"

    _store: Any
    _address: tuple[str, int]
    _closed: bool

    def _probe_service(
        self, field: str, url: str, address: tuple[str, int], timeout_s: float
    ) -> None:
        """Remember the service's `address`, after checking that something listens there.

        Stores retry a dead address for a long time inside their own setup; a refused connect
        here costs microseconds.

        Raises:
            BackendError: nothing listens at `address` (the message names `field=url`).
        """
        reason = probe_tcp(*address, timeout_s)
        if reason is not None:
            raise BackendError(f"{self.store_name} {field}={url}: cannot connect ({reason})")
        self._address = address

    @staticmethod
    def _check_buffers(ptrs: Sequence[int], lengths: Sequence[int]) -> None:
        """Validate `register_buffer` arguments: as many lengths as pointers, all positive.

        Raises:
            ValueError: otherwise.
        """
        if len(ptrs) != len(lengths) or any(n <= 0 for n in lengths):
            raise ValueError(f"register_buffer: {len(ptrs)} pointers, lengths {list(lengths)}")

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

    def is_reachable(self) -> bool:
        return probe_tcp(*self._address, timeout_s=0.5) is None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._store.close()
