"""Test doubles around a real KV pool store (`Backend`): each test overrides the one call it
observes or delays; every other call goes to the real store unchanged."""

from __future__ import annotations

from collections.abc import Sequence

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import Backend


class WrappedBackend(Backend):
    """A `Backend` that delegates every call to `inner` (a real store)."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(None)
        self.inner = inner
        self.name = inner.name

    def register_buffer(self, ptrs: Sequence[int], lengths: Sequence[int]) -> None:
        self.inner.register_buffer(ptrs, lengths)

    def exists(self, keys: Sequence[str]) -> list[int]:
        return self.inner.exists(keys)

    def put(
        self, keys: Sequence[str], addrs: Sequence[Sequence[int]], sizes: Sequence[Sequence[int]]
    ) -> list[int]:
        return self.inner.put(keys, addrs, sizes)

    def get(
        self, keys: Sequence[str], addrs: Sequence[Sequence[int]], sizes: Sequence[Sequence[int]]
    ) -> list[int]:
        return self.inner.get(keys, addrs, sizes)

    @property
    def service(self) -> str:
        return self.inner.service

    def is_reachable(self) -> bool:
        return self.inner.is_reachable()

    def close(self) -> None:
        self.inner.close()
