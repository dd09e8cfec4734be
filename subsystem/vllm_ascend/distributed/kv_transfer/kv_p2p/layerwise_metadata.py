"""Scheduler -> worker metadata of the layerwise connector."""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata

from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_params import RemotePrefill

__all__ = ["LayerwiseMetadata", "LoadSpec", "SaveSpec"]


@dataclass(frozen=True)
class LoadSpec:
    """Decode side: a request whose prompt KV the prefill instance pushes, layer by layer.

    Attributes:
        request_id: the decode instance's request id.
        transfer_id: shared with the prefill request.
        remote: the prefill side channel (its `request_id` is the transfer id).
        block_ids: decode blocks for token blocks `first_block, first_block + 1, ...`;
            empty means "nothing to push, release the prefill side".
        first_block: index of the first token block to receive (earlier ones are cached).
    """

    request_id: str
    transfer_id: str
    remote: RemotePrefill
    block_ids: list[int]
    first_block: int


@dataclass(frozen=True)
class SaveSpec:
    """Prefill side: a request this step computes tokens of, whose KV goes to a decode side.

    Attributes:
        request_id: the prefill instance's request id.
        transfer_id: shared with the decode request.
        block_ids: all the request's blocks so far, in token order.
        start_block: first token block this step writes.
        end_block: one past the last token block this step writes.
        final: this step completes the prompt.
    """

    request_id: str
    transfer_id: str
    block_ids: list[int]
    start_block: int
    end_block: int
    final: bool


@dataclass
class LayerwiseMetadata(KVConnectorMetadata):
    """Scheduler -> worker, once per step.

    Attributes:
        loads: decode requests computed this step (their KV arrives during the forward).
        releases: decode requests that will never receive (aborted, or all cached).
        saves: prefill requests computed this step.
        sends: prefill requests that finished this step: request id -> seconds to hold.
        withheld: transfers this prefill instance will not push: transfer id -> reason (the
            worker tells their decode workers at once).
    """

    loads: list[LoadSpec] = field(default_factory=list)
    releases: list[LoadSpec] = field(default_factory=list)
    saves: list[SaveSpec] = field(default_factory=list)
    sends: dict[str, float] = field(default_factory=dict)
    withheld: dict[str, str] = field(default_factory=dict)
