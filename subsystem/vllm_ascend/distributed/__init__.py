"""Distributed serving on Ascend NPUs: device communicators and KV transfer (0.14 layout).

`device_communicators` holds the HCCL communicators; `kv_transfer` the KV connectors, the KV
pools and their helpers (`kv_transfer.register_connector` registers the connectors).

The flat 0.13 paths (`vllm_ascend.distributed.mooncake_connector`, `...kvpool`,
`...cpu_offload_manager`, the helpers that left `vllm_ascend.distributed.utils`, and
`register_connector` here) keep working through the runtime shims installed below: the old
module path is the same module object as the new one, and each old name warns once per
process. The table is `rules/vllm_ascend.toml`; `vam migrate` rewrites the callers.
`VLLM_ASCEND_SHIMS=error` makes every old name fail with ImportError (for downstream CI),
`VLLM_ASCEND_SHIMS=ignore` silences the warnings.
"""

import shims as _shims

_shims.install("vllm_ascend")
