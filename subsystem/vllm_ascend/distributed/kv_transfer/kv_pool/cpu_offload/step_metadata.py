"""What the scheduler side tells the workers to transfer in one step (vLLM connector metadata)."""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata

__all__ = ["BlockTransfer", "CPUOffloadingConnectorMetadata"]


@dataclass
class BlockTransfer:
    """Blocks of one request to move between the KV cache and the host pool.

    Attributes:
        req_id: the vLLM request id.
        device_block_ids: KV cache block ids (vLLM's block table, KV cache group 0).
        host_block_ids: host pool block ids, same length; `device_block_ids[i]` pairs with
            `host_block_ids[i]`.
    """

    req_id: str
    device_block_ids: list[int]
    host_block_ids: list[int]

    def __post_init__(self) -> None:
        if len(self.device_block_ids) != len(self.host_block_ids):
            raise ValueError(
                f"request {self.req_id}: {len(self.device_block_ids)} device blocks but "
                f"{len(self.host_block_ids)} host blocks"
            )


@dataclass
class CPUOffloadingConnectorMetadata(KVConnectorMetadata):
    """One step's transfers.

    Attributes:
        loads: host -> KV cache, done in `start_load_kv` before the forward pass.
        stores: KV cache -> host, done in `wait_for_save` after the forward pass, for blocks
            that became full in this step.
        failed_load_block_ids: KV cache blocks promised to the scheduler whose host copy
            vanished before it could be pinned; the worker reports them through
            `get_block_ids_with_load_errors` so vLLM recomputes or fails per
            `kv_load_failure_policy`.
    """

    loads: list[BlockTransfer] = field(default_factory=list)
    stores: list[BlockTransfer] = field(default_factory=list)
    failed_load_block_ids: list[int] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.loads or self.stores or self.failed_load_block_ids)
