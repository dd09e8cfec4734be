"""Helpers shared by the KV connectors.

- `device`: the device abstraction (NPU through `torch_npu` when importable, else the device of
  the KV cache tensors vLLM hands over).
- `block_copy`: batched copies of KV cache blocks between the KV cache and host buffers
  (`block_copy_cpu`: the CPU path, byte ranges copied by the compiled `_block_memmove`, or
  through memoryviews where it did not build).
- `scheduler_inputs`, `connector_stats`: what the schedulers and the stats modules share.
- `utils`: the all-to-all/rearrange helpers, `align_memory` and `get_transfer_timeout_value`.
- `mooncake_transfer_engine`: the Mooncake transfer engine shared by the Mooncake connectors.
- `connector_facade`: `KVConnectorFacade`, the role-split connector class the connectors share,
  and `WholeStepTransfers`, the per-layer hooks of connectors that move whole steps.
- `daemon_threads`: `DaemonThreads`, daemon threads fed by one bounded queue (the P/D transfer
  threads, the KV pool's sending and receiving threads).
- `zmq_router`: the ZMQ ROUTER bind and serve loop (the P/D side channel, the CPU offload
  metadata server).
- `extra_config`: validation helpers for `kv_connector_extra_config`.

Nothing is imported here: most helper modules import torch or vLLM, and callers pick the one
they need.
"""
