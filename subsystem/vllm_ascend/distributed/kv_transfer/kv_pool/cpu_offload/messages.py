"""Messages between the CPU offload metadata server and its clients (msgspec structs, msgpack
on the wire, never pickle). A client in the server's own process hands them over directly.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "Acquire",
    "Body",
    "Commit",
    "Discard",
    "GetStats",
    "Lookup",
    "MetadataServerError",
    "Register",
    "Request",
    "Reply",
    "Reset",
    "StepDone",
    "StoreRequest",
]


class Lookup(msgspec.Struct, tag=True):
    """How many leading blocks of `block_hashes` are ready? Reply: int."""

    block_hashes: list[bytes]


class Acquire(msgspec.Struct, tag=True):
    """Pin the leading ready blocks for `owner` (a request id). Reply: list of host block ids."""

    owner: str
    block_hashes: list[bytes]


class StoreRequest(msgspec.Struct):
    """Blocks of one request that became full this step."""

    owner: str
    block_hashes: list[bytes]


class Commit(msgspec.Struct, tag=True):
    """End of a scheduler step: drop the pins of `release`, allocate host blocks for `stores`.

    Reply: `[allocations, skipped]`: for each store request a list of
    `[index into its block_hashes, host block id]` to store, and the number of blocks that
    found no free or evictable host block (their stores are skipped).
    """

    release: list[str]
    stores: list[StoreRequest]


class Register(msgspec.Struct, tag=True):
    """A worker's first contact. Reply: the number of host blocks it must allocate."""

    rank: int
    world_size: int
    bytes_per_block: int


class StepDone(msgspec.Struct, tag=True):
    """A worker finished a step's transfers. Reply: None."""

    rank: int
    stored: list[int]
    store_failed: list[int]
    loaded_blocks: int
    load_failed_blocks: int


class GetStats(msgspec.Struct, tag=True):
    """Reply: a dict of counters and gauges (see `MetadataServer.stats`)."""


class Reset(msgspec.Struct, tag=True):
    """Forget every ready, unpinned block (vLLM's connector `reset_cache`). Reply: int."""


class Discard(msgspec.Struct, tag=True):
    """Forget the given ready, unpinned blocks. Reply: int, how many were dropped."""

    block_hashes: list[bytes]


Body = Lookup | Acquire | Commit | Register | StepDone | GetStats | Reset | Discard


class Request(msgspec.Struct):
    """One call on the wire: `seq` pairs it with its `Reply`."""

    seq: int
    body: Body


class Reply(msgspec.Struct):
    """The answer to the `Request` of the same `seq`: a value, or an error message."""

    seq: int
    value: Any = None
    error: str | None = None


class MetadataServerError(RuntimeError):
    """The metadata server did not answer in time, or answered with an error."""
