"""What the KV pool's scheduler side tells its workers for one step (vLLM connector metadata).

- `ReqMeta`: one request's loads or saves in one step;
- `AscendConnectorMetadata`: the step's loads, saves and preemptions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata

__all__ = ["AscendConnectorMetadata", "ReqMeta"]


@dataclass
class ReqMeta:
    """One request's transfer in one step: KV cache block `block_ids[i]` holds the chunk whose
    hash is `block_hashes[i]`.

    Attributes:
        req_id: the request.
        block_ids: KV cache block ids (group 0), one per chunk.
        block_hashes: vLLM block hashes, one per chunk.
        is_async: for loads, whether the request waits for it outside the batch (the worker
            reports it in `finished_recving`) instead of the load preceding this step's forward.
    """

    req_id: str
    block_ids: list[int]
    block_hashes: list[bytes]
    is_async: bool = False

    def __post_init__(self) -> None:
        if len(self.block_ids) != len(self.block_hashes):
            raise ValueError(
                f"request {self.req_id}: {len(self.block_ids)} block ids but "
                f"{len(self.block_hashes)} block hashes"
            )


@dataclass
class AscendConnectorMetadata(KVConnectorMetadata):
    """What the scheduler side tells every worker for one step.

    Attributes:
        loads: chunks to read from the pool into the KV cache.
        saves: full chunks to write from the KV cache to the pool.
        preempted_req_ids: requests preempted this step; their queued saves must finish before
            their blocks are reused.
    """

    loads: list[ReqMeta] = field(default_factory=list)
    saves: list[ReqMeta] = field(default_factory=list)
    preempted_req_ids: list[str] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.loads or self.saves or self.preempted_req_ids)
