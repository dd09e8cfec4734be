"""Configuration of the CPU offload connector, read once from `kv_connector_extra_config`.

Keys (all optional; unknown keys are errors, a typo must not silently fall back to a default):
the `setting` fields of `CPUOffloadConfig`, each with its default and meaning (the table in
README.md is rendered from them by `config_table`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vllm_ascend.distributed.kv_transfer.utils.extra_config import (
    ConfigKey,
    ExtraConfigSource,
    parse,
    positive,
    setting,
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

_SOURCE = ExtraConfigSource("CPU offload")
_GIB = positive()


def default_metadata_server_address(engine_id: str, dp_rank: int = 0) -> str:
    """An `ipc://` endpoint unique to one engine (and data-parallel rank) on this host.

    Every process of an engine derives the same path from the engine id that vLLM hands to all
    of them in `KVTransferConfig.engine_id`.
    """
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in engine_id)[:48]
    path = os.path.join(tempfile.gettempdir(), f"vllm-ascend-cpu-offload-{safe}-dp{dp_rank}.ipc")
    return f"ipc://{path}"


def _zmq_endpoint(label: str, value: Any, values: Mapping[str, Any]) -> str:
    if not isinstance(value, str) or "://" not in value:
        raise ValueError(
            f"{label} must be a ZMQ endpoint such as 'ipc:///tmp/x.ipc' or "
            f"'tcp://127.0.0.1:5555', got {value!r}"
        )
    return value


def _gib_to_bytes(label: str, value: Any, values: Mapping[str, Any]) -> int:
    return int(_GIB(label, value, values) * GIB_BYTES)


@dataclass(frozen=True)
class CPUOffloadConfig:
    """Validated settings of one CPU offload connector.

    No field has a default (the benchmarks construct it positionally): the defaults of absent
    keys are their `derive`.

    Attributes:
        cpu_capacity_bytes: host memory per worker for offloaded blocks, bytes.
        metadata_server_address: ZMQ endpoint of the metadata server.
        rpc_timeout_s: bound on every blocking metadata RPC, seconds.
    """

    cpu_capacity_bytes: int = setting(
        "host memory for offloaded KV blocks, per worker, in bytes (integer > 0)",
        positive(integer=True),
        derive=lambda values: DEFAULT_CPU_CAPACITY_BYTES,
        default_doc="4 GiB",
        also=(
            ConfigKey(
                "the same in GiB (`2**30` bytes, number > 0); exclusive with `cpu_capacity_bytes`",
                _gib_to_bytes,
                name="cpu_capacity_gib",
                default_doc="-",
            ),
        ),
    )
    metadata_server_address: str = setting(
        "ZMQ endpoint of the metadata server",
        _zmq_endpoint,
        none_is_absent=True,
        default_doc="an `ipc://` path in the temp dir, unique per engine and data-parallel rank",
    )
    rpc_timeout_s: float = setting(
        "how long a metadata RPC waits for its answer, seconds (number > 0)",
        positive(),
        derive=lambda values: DEFAULT_RPC_TIMEOUT_S,
        default_doc="`30.0`",
    )

    @classmethod
    def from_extra_config(
        cls, extra: Mapping[str, Any] | None, *, engine_id: str, dp_rank: int = 0
    ) -> CPUOffloadConfig:
        """Parse and validate `kv_connector_extra_config` (raises `ValueError`: see `parse`)."""
        address = default_metadata_server_address(engine_id, dp_rank)
        return parse(cls, extra or {}, _SOURCE, metadata_server_address=address)

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
