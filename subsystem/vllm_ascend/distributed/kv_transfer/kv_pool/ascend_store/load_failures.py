"""`RecentLoadFailures`: block hashes whose load failed recently, to be answered as misses.

When the host holding pool values goes silent, the store's master keeps listing its keys until
it forgets the host (Mooncake: `--client_ttl` after the last heartbeat). Until then `exists`
says "present" and every load of those blocks fails again, each after the store's or the
connector's timeouts (seconds). The scheduler side remembers the hashes of blocks whose load
failed and answers them as misses without asking the store for `failed_load_ttl_s`; after that
it asks again, so hits resume once the host is back or the blocks are saved elsewhere.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

__all__ = ["RecentLoadFailures"]


class RecentLoadFailures:
    """A bounded set of block hashes, each kept `ttl_s` seconds after its last failed load.

    Args:
        ttl_s: how long a hash stays in the set after `add`, seconds.
        max_entries: the most hashes kept; adding beyond it drops the oldest first.
        clock: time source (seconds, monotonic), for tests.
    """

    def __init__(
        self,
        ttl_s: float,
        max_entries: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries <= 0:
            raise ValueError(f"max_entries must be positive, got {max_entries}")
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.clock = clock
        # hash -> expiry time; with one TTL, insertion order is expiry order.
        self._expiry: OrderedDict[bytes, float] = OrderedDict()

    def add(self, block_hashes: Iterable[bytes]) -> None:
        """Remember `block_hashes` for `ttl_s` from now (a hash already held is renewed)."""
        expiry = self.clock() + self.ttl_s
        for block_hash in block_hashes:
            self._expiry[block_hash] = expiry
            self._expiry.move_to_end(block_hash)
        while len(self._expiry) > self.max_entries:
            self._expiry.popitem(last=False)

    def __contains__(self, block_hash: object) -> bool:
        self._drop_expired()
        return block_hash in self._expiry

    def __len__(self) -> int:
        self._drop_expired()
        return len(self._expiry)

    def _drop_expired(self) -> None:
        now = self.clock()
        while self._expiry:
            oldest = next(iter(self._expiry))
            if self._expiry[oldest] > now:
                return
            del self._expiry[oldest]
