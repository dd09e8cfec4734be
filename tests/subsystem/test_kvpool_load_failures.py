"""`RecentLoadFailures`: block hashes whose load failed, kept `ttl_s` seconds and bounded in
number (the oldest dropped first), on an injected clock."""

from __future__ import annotations

import pytest

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.load_failures import (
    RecentLoadFailures,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_a_hash_is_held_for_its_ttl_and_renewed_by_a_new_failure() -> None:
    clock = FakeClock()
    failures = RecentLoadFailures(ttl_s=5.0, max_entries=10, clock=clock)
    failures.add([b"a", b"b"])
    clock.now += 3.0
    failures.add([b"a"])  # failed again: held 5 s from now
    assert b"a" in failures and b"b" in failures and b"c" not in failures
    clock.now += 2.0  # b's 5 s are over, a's are not
    assert b"b" not in failures and b"a" in failures
    assert len(failures) == 1
    clock.now += 3.0
    assert b"a" not in failures and len(failures) == 0


def test_the_oldest_hashes_are_dropped_beyond_the_cap() -> None:
    clock = FakeClock()
    failures = RecentLoadFailures(ttl_s=60.0, max_entries=3, clock=clock)
    failures.add([b"1", b"2", b"3"])
    failures.add([b"1"])  # renewed: now the newest
    failures.add([b"4", b"5"])
    assert len(failures) == 3
    assert [h in failures for h in (b"1", b"2", b"3", b"4", b"5")] == [
        True,
        False,
        False,
        True,
        True,
    ]


def test_a_cap_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_entries must be positive, got 0"):
        RecentLoadFailures(ttl_s=1.0, max_entries=0)
