"""CPUOffloadConfig: `kv_connector_extra_config` validation (stdlib only)."""

from __future__ import annotations

from typing import Any

import pytest

from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.config import (
    DEFAULT_CPU_CAPACITY_BYTES,
    CPUOffloadConfig,
    default_metadata_server_address,
)


def parse(extra: dict[str, Any] | None) -> CPUOffloadConfig:
    return CPUOffloadConfig.from_extra_config(extra, engine_id="eng-1", dp_rank=0)


def test_defaults() -> None:
    c = parse(None)
    assert c.cpu_capacity_bytes == DEFAULT_CPU_CAPACITY_BYTES
    assert c.metadata_server_address == default_metadata_server_address("eng-1", 0)
    assert c.metadata_server_address.startswith("ipc://")
    assert c.rpc_timeout_s > 0


def test_capacity_in_bytes_and_gib() -> None:
    assert parse({"cpu_capacity_bytes": 1 << 20}).cpu_capacity_bytes == 1 << 20
    assert parse({"cpu_capacity_gib": 1.5}).cpu_capacity_bytes == 3 << 29
    assert parse({"cpu_capacity_gib": 2}).cpu_capacity_bytes == 2 << 30


def test_address_is_unique_per_engine_and_dp_rank() -> None:
    a = default_metadata_server_address("e1", 0)
    assert a != default_metadata_server_address("e2", 0)
    assert a != default_metadata_server_address("e1", 1)
    # Odd characters in an engine id never reach the path.
    assert "/" not in default_metadata_server_address("a/b:c", 0).split("cpu-offload-")[1]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"cpu_capacity_bytes": -1}, "must be positive"),
        ({"cpu_capacity_bytes": 0}, "must be positive"),
        ({"cpu_capacity_gib": -0.5}, "must be positive"),
        ({"cpu_capacity_gib": float("nan")}, "must be positive"),
        ({"cpu_capacity_bytes": 1.5}, "must be an integer"),
        ({"cpu_capacity_bytes": "1GB"}, "must be an integer"),
        ({"cpu_capacity_bytes": True}, "must be an integer"),
        ({"cpu_capacity_gib": "2"}, "must be a number"),
        ({"rpc_timeout_s": 0}, "must be positive"),
        ({"cpu_capacity_bytes": 1, "cpu_capacity_gib": 1}, "not both"),
        ({"metadata_server_address": "localhost:5555"}, "ZMQ endpoint"),
        ({"cpu_capacity": 1}, r"unknown .*\['cpu_capacity'\].*valid keys"),
    ],
)
def test_bad_values_name_the_key(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse(extra)


def test_capacity_below_one_block() -> None:
    c = parse({"cpu_capacity_bytes": 1000})
    assert c.num_cpu_blocks(100) == 10
    with pytest.raises(ValueError, match="below one KV cache block"):
        c.num_cpu_blocks(1001)
