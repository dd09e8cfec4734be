"""Configuration of the CPU offload connector, read once from `kv_connector_extra_config`.

Keys (all optional):

- `cpu_capacity_bytes` (int > 0): host memory for offloaded KV blocks, per worker, in bytes
  (default 4 GiB);
- `cpu_capacity_gib` (number > 0): the same in GiB (2**30 bytes); exclusive with the above;
- `metadata_server_address` (str): ZMQ endpoint of the metadata server (default: an `ipc://`
  path in the temp dir, unique per engine and data-parallel rank);
- `rpc_timeout_s` (number > 0): how long a metadata RPC waits for its answer, in seconds
  (default 30).

Unknown keys are errors (a typo must not silently fall back to a default).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vllm_ascend.distributed.kv_transfer.utils.extra_config import (
    check_known_keys,
    positive_number,
)

__all__ = [
    "DEFAULT_CPU_CAPACITY_BYTES",
    "DEFAULT_RPC_TIMEOUT_S",
    "CPUOffloadConfig",
    "default_metadata_server_address",
]

GIB_BYTES = 1 << 30
DEFAULT_CPU_CAPACITY_BYTES = 4 * GIB_BYTES
DEFAULT_RPC_TIMEOUT_S = 30.0

_KEYS = ("cpu_capacity_bytes", "cpu_capacity_gib", "metadata_server_address", "rpc_timeout_s")


def default_metadata_server_address(engine_id: str, dp_rank: int = 0) -> str:
    """An `ipc://` endpoint unique to one engine (and data-parallel rank) on this host.

    Every process of an engine derives the same path from the engine id that vLLM hands to all
    of them in `KVTransferConfig.engine_id`.
    """
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in engine_id)[:48]
    path = os.path.join(tempfile.gettempdir(), f"vllm-ascend-cpu-offload-{safe}-dp{dp_rank}.ipc")
    return f"ipc://{path}"


@dataclass(frozen=True)
class CPUOffloadConfig:
    """Validated settings of one CPU offload connector.

    Attributes:
        cpu_capacity_bytes: host memory per worker for offloaded blocks, bytes.
        metadata_server_address: ZMQ endpoint of the metadata server.
        rpc_timeout_s: bound on every blocking metadata RPC, seconds.
    """

    cpu_capacity_bytes: int
    metadata_server_address: str
    rpc_timeout_s: float

    @classmethod
    def from_extra_config(
        cls, extra: Mapping[str, Any] | None, *, engine_id: str, dp_rank: int = 0
    ) -> CPUOffloadConfig:
        """Parse and validate `kv_connector_extra_config`.

        Raises:
            ValueError: unknown key (the message lists the valid ones), a value of the wrong
                type, a capacity or timeout that is not positive, or both capacity keys.
        """
        extra = dict(extra or {})
        check_known_keys(extra, _KEYS, connector="CPU offload")
        if "cpu_capacity_bytes" in extra and "cpu_capacity_gib" in extra:
            raise ValueError("set either cpu_capacity_bytes or cpu_capacity_gib, not both")
        capacity = DEFAULT_CPU_CAPACITY_BYTES
        if "cpu_capacity_bytes" in extra:
            capacity = int(
                positive_number("cpu_capacity_bytes", extra["cpu_capacity_bytes"], integer=True)
            )
        elif "cpu_capacity_gib" in extra:
            gib = positive_number("cpu_capacity_gib", extra["cpu_capacity_gib"], integer=False)
            capacity = int(gib * GIB_BYTES)
        timeout = DEFAULT_RPC_TIMEOUT_S
        if "rpc_timeout_s" in extra:
            timeout = positive_number("rpc_timeout_s", extra["rpc_timeout_s"], integer=False)
        address = extra.get("metadata_server_address")
        if address is None:
            address = default_metadata_server_address(engine_id, dp_rank)
        elif not isinstance(address, str) or "://" not in address:
            raise ValueError(
                "kv_connector_extra_config['metadata_server_address'] must be a ZMQ endpoint "
                f"such as 'ipc:///tmp/x.ipc' or 'tcp://127.0.0.1:5555', got {address!r}"
            )
        return cls(
            cpu_capacity_bytes=capacity, metadata_server_address=address, rpc_timeout_s=timeout
        )

    def num_cpu_blocks(self, bytes_per_block: int) -> int:
        """How many KV cache blocks of `bytes_per_block` bytes fit in the capacity.

        Raises:
            ValueError: the capacity is below one block.
        """
        if bytes_per_block <= 0:
            raise ValueError(f"bytes_per_block must be positive, got {bytes_per_block}")
        blocks = self.cpu_capacity_bytes // bytes_per_block
        if blocks < 1:
            raise ValueError(
                f"CPU offload capacity of {self.cpu_capacity_bytes} bytes is below one KV cache "
                f"block ({bytes_per_block} bytes per block on this worker); raise "
                "cpu_capacity_bytes or cpu_capacity_gib"
            )
        return blocks
