"""The `--kv-transfer-config` of each soak engine, and which part runs where.

Each engine computes on one OMP thread bound to one of the machine's cores (`CORES`); the
reference engine runs only while the references are computed. Every connector is the
project's, named with its `kv_connector_module_path`, and the load failure policy is
`recompute` (a failed load is recomputed, never decoded from unfilled blocks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import free_port

from .parts import Pool, Server

__all__ = ["CORES", "LOCAL_BLOCKS", "layerwise_servers", "make_servers"]

P2P = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"
LAYERWISE = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_layerwise_connector"
STORE = "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.ascend_store_connector"
OFFLOAD = "vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.cpu_offload_connector"
CORES = {
    "reference": "0", "prefill": "0", "decode": "1", "pool": "0", "offload": "1",
    "lw_prefill": "0", "lw_decode": "1",
}  # fmt: skip
# Own KV cache per engine, 32-token blocks. The 36 prompts need about 140 blocks in all: the
# pool and offload engines (64) evict and load back through their connector.
LOCAL_BLOCKS = {
    "reference": 128, "prefill": 128, "decode": 128, "pool": 64, "offload": 64,
    "lw_prefill": 128, "lw_decode": 128,
}  # fmt: skip
# P/D side channel and transfer bounds (s): a prefill frees a block its decode never read after
# `send_timeout_s`.
PD_EXTRA = {"handshake_timeout_s": 10, "transfer_timeout_s": 15, "send_timeout_s": 30}
# Mooncake's TCP transfer bounds for the pool engine (s): a transfer to a silent pool host ends.
MC_TCP_TIMEOUT_S = "8"


def pd_config(role: str, layerwise: bool = False) -> dict[str, Any]:
    return {
        "kv_connector": "MooncakeLayerwiseConnector" if layerwise else "MooncakeConnectorV1",
        "kv_connector_module_path": LAYERWISE if layerwise else P2P,
        "kv_role": role,
        "kv_port": free_port(),
        "kv_load_failure_policy": "recompute",
        "kv_connector_extra_config": dict(PD_EXTRA),
    }


def pool_config(pool: Pool) -> dict[str, Any]:
    return {
        "kv_connector": "AscendStoreConnector",
        "kv_connector_module_path": STORE,
        "kv_role": "kv_both",
        "kv_load_failure_policy": "recompute",
        "kv_connector_extra_config": {
            "mooncake": pool.store_config(),
            "retry_interval_s": 2,
            "error_log_interval_s": 10,
        },
    }


def offload_config() -> dict[str, Any]:
    return {
        "kv_connector": "CPUOffloadingConnector",
        "kv_connector_module_path": OFFLOAD,
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "metadata_server_address": f"tcp://127.0.0.1:{free_port()}",
            "rpc_timeout_s": 20,
        },
    }


def make_servers(model: Path, pool: Pool, logs: Path) -> dict[str, Server]:
    """Every engine of the soak (not started), by role."""
    pool_env = {
        "VLLM_HOST_IP": pool.root_address,
        "MC_TCP_PROGRESS_TIMEOUT_SEC": MC_TCP_TIMEOUT_S,
        "MC_TCP_STATUS_TIMEOUT_SEC": MC_TCP_TIMEOUT_S,
    }
    configs: dict[str, tuple[dict[str, Any] | None, dict[str, str]]] = {
        "reference": (None, {}),
        "prefill": (pd_config("kv_producer"), {}),
        "decode": (pd_config("kv_consumer"), {}),
        "pool": (pool_config(pool), pool_env),
        "offload": (offload_config(), {}),
    }
    return {
        name: Server(name, model, kv, logs, core=CORES[name], blocks=LOCAL_BLOCKS[name], env=env)
        for name, (kv, env) in configs.items()
    }


def layerwise_servers(model: Path, logs: Path) -> dict[str, Server]:
    """The layerwise P/D pair (not started): `lw_prefill` pushes each layer to `lw_decode`."""
    configs = {"lw_prefill": "kv_producer", "lw_decode": "kv_consumer"}
    return {
        name: Server(
            name, model, pd_config(role, layerwise=True), logs,
            core=CORES[name], blocks=LOCAL_BLOCKS[name],
        )
        for name, role in configs.items()
    }  # fmt: skip
