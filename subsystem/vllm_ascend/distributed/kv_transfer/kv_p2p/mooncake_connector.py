"""`MooncakeConnector`: vLLM disaggregated prefill over Mooncake (registered as
`MooncakeConnectorV1`).

Use it on both instances, e.g. for the decode instance::

    KVTransferConfig(
        kv_connector="MooncakeConnectorV1",
        kv_role="kv_consumer",          # "kv_producer" on the prefill instance
        kv_port=20001,                  # side-channel base port (prefill instance)
        kv_connector_extra_config={"prefill": {"tp_size": 2}, "decode": {"tp_size": 1}},
    )

A proxy sends each request to the prefill instance with `max_tokens=1` and
`kv_transfer_params={"do_remote_decode": True}`, then forwards the `kv_transfer_params` of
that answer to the decode instance (`examples/pd_proxy.py`). The decode instance reads the
prompt's KV blocks from the prefill instance with batched Mooncake transfers and computes only
the last prompt token itself. Settings: `config.py`.

The class is a thin facade (`p2p_connector.py`, `utils/connector_facade.py`): by role it holds a
`MooncakeConnectorScheduler` or a `MooncakeConnectorWorker` and forwards each
`KVConnectorBase_V1` method to the side that owns it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vllm_ascend.distributed.kv_transfer.kv_p2p.p2p_connector import MooncakeP2PFacade
from vllm_ascend.distributed.kv_transfer.kv_p2p.pull_metadata import MooncakeConnectorMetadata
from vllm_ascend.distributed.kv_transfer.kv_p2p.pull_scheduler import MooncakeConnectorScheduler
from vllm_ascend.distributed.kv_transfer.kv_p2p.pull_worker import MooncakeConnectorWorker
from vllm_ascend.distributed.kv_transfer.utils.connector_facade import WholeStepTransfers

if TYPE_CHECKING:
    from vllm.forward_context import ForwardContext

__all__ = ["MooncakeConnector", "MooncakeConnectorMetadata", "MooncakeConnectorV1"]


class MooncakeConnector(
    WholeStepTransfers,
    MooncakeP2PFacade[MooncakeConnectorScheduler, MooncakeConnectorWorker],
):
    """Prefill/decode KV transfer: the decode instance reads the prefill instance's blocks.

    Args:
        vllm_config: the engine config; `kv_transfer_config` holds the role, port and
            `kv_connector_extra_config`.
        role: scheduler or worker.
        kv_cache_config: the KV cache layout (number of blocks).

    Raises:
        ValueError: bad `kv_connector_extra_config` (unknown key, wrong type), an
            unsupported prefill/decode TP pairing, or pipeline parallelism.
    """

    scheduler_class = MooncakeConnectorScheduler
    worker_class = MooncakeConnectorWorker

    # ---- worker side ----------------------------------------------------------------------

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        meta = self._step_metadata(MooncakeConnectorMetadata)
        worker = self._worker()
        # vLLM's steps without a forward pass (every request waiting) have no attention
        # metadata.
        worker.note_step(ran_forward=forward_context.attn_metadata is not None)
        worker.add_sends(meta.send)
        worker.add_recvs(meta.recv)

    # Nothing per layer (WholeStepTransfers): loads are asynchronous and complete before the
    # request is scheduled, and the decode side reads finished blocks.


# The name this connector is registered under (docs/architecture.md, "Subsystem"): vLLM
# resolves `kv_connector` as an attribute of `kv_connector_module_path` first.
MooncakeConnectorV1 = MooncakeConnector
