"""What the scheduler side tells the worker side each step (`KVConnectorMetadata`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata

from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_params import RecvRequest

__all__ = ["MooncakeConnectorMetadata"]


@dataclass
class MooncakeConnectorMetadata(KVConnectorMetadata):
    """Scheduler -> worker, once per step.

    Attributes:
        recv: decode requests to read (or release) this step.
        send: prefill requests that finished this step and hold their blocks for a reader:
            request id -> seconds to keep them.
    """

    recv: list[RecvRequest] = field(default_factory=list)
    send: dict[str, float] = field(default_factory=dict)
