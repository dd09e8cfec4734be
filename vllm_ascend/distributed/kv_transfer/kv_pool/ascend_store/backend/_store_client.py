"""Plumbing shared by the backends that wrap a networked store client (`MooncakeBackend`,
`MemcacheBackend`); the `Backend` contract itself is in `backend.py`.

- `read_store_settings`: a store's raw settings from its entry in `kv_connector_extra_config`
  or, when that is absent, from the JSON file named by an environment variable.
- `StoreClientBackend`: a `Backend` that holds one store client (`_store`) whose service
  listens at a TCP address (`_address`): the argument check of `register_buffer`, the reading
  of `batch_is_exist` codes, the liveness probe and an idempotent `close`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import (
    Backend,
    BackendError,
    probe_tcp,
)

__all__ = ["StoreClientBackend", "read_store_settings"]


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

    def is_reachable(self) -> bool:
        return probe_tcp(*self._address, timeout_s=0.5) is None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._store.close()
