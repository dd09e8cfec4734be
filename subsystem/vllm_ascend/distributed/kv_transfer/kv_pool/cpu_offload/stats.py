"""`CPUOffloadStats`: the CPU offload connector's counters, for vLLM's metrics (`/metrics`:
`vllm:cpu_offload_<name>_total`).

The scheduler side counts lookups and hits, the workers count the blocks they copied.
"""

from __future__ import annotations

from vllm_ascend.distributed.kv_transfer.utils.connector_stats import CounterStats

__all__ = ["CPUOffloadStats"]


class CPUOffloadStats(CounterStats):
    """Counter increases of the CPU offload connector (names: `COUNTERS`)."""

    METRIC_PREFIX = "vllm:cpu_offload_"
    COUNTERS = {
        "lookups": "Requests whose prompt the scheduler looked up in the host pool.",
        "hit_blocks": "KV blocks found in the host pool by lookups (prefix hits).",
        "store_skipped_blocks": "Full KV blocks not offloaded because the host pool was full.",
        "loaded_blocks": "KV blocks copied from the host pool into the KV cache, all workers.",
        "load_failed_blocks": "KV blocks whose load failed (copy error, or evicted between "
        "lookup and load), all workers.",
        "stored_blocks": "KV blocks copied from the KV cache into the host pool, all workers.",
        "store_failed_blocks": "KV blocks whose copy to the host pool failed, all workers.",
    }
