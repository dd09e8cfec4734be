"""`AscendStoreStats`: the KV pool connector's counters, for vLLM's metrics (`/metrics`:
`vllm:ascend_store_<name>_total`).

The scheduler side counts lookups, hits and blocks skipped after failed loads; the workers
count the blocks they moved.
"""

from __future__ import annotations

from vllm_ascend.distributed.kv_transfer.utils.connector_stats import CounterStats

__all__ = ["AscendStoreStats"]


class AscendStoreStats(CounterStats):
    """Counter increases of the AscendStoreConnector (names: `COUNTERS`)."""

    METRIC_PREFIX = "vllm:ascend_store_"
    COUNTERS = {
        "lookups": "Batched existence checks the scheduler sent to the store.",
        "hit_blocks": "KV blocks of prompt prefixes found in the pool (prefix hits).",
        "failed_load_misses": (
            "Prompt blocks answered as misses without asking the store: their load failed "
            "within failed_load_ttl_s."
        ),
        "unanswered_lookups": (
            "Lookups answered as all misses because the store did not answer within "
            "lookup_timeout_s, or an earlier lookup was still waiting for it."
        ),
        "loaded_blocks": "KV blocks read from the pool into the KV cache, all workers.",
        "load_failed_blocks": "KV blocks whose load failed (missing, store error), all workers.",
        "saved_blocks": "KV blocks written to the pool (or already there), all workers.",
        "save_failed_blocks": "KV blocks not saved (pool full, store error, queue full).",
        "pool_failures": "Store calls that failed as a whole (the pool is then bypassed).",
    }
