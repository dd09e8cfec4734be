"""`MooncakeP2PStats`: the Mooncake P/D connectors' counters, for vLLM's metrics (`/metrics`:
`vllm:mooncake_p2p_<name>_total`).

The scheduler side counts hand-offs, the workers count reads (pull, `MooncakeConnector`) or
layer loads and pushes (push, `MooncakeLayerwiseConnector`).
"""

from __future__ import annotations

from vllm_ascend.distributed.kv_transfer.utils.connector_stats import CounterStats

__all__ = ["MooncakeP2PStats"]


class MooncakeP2PStats(CounterStats):
    """Counter increases of the Mooncake P/D connectors (names: `COUNTERS`)."""

    METRIC_PREFIX = "vllm:mooncake_p2p_"
    COUNTERS = {
        "handoffs": "Prefill requests whose KV blocks were handed to a decode instance.",
        "recv_requests": "Decode requests that read their prompt's KV from a prefill instance.",
        "loads": "Decode requests that receive their prompt's KV layer by layer.",
        "released_unread": "Held prefill blocks freed without a reader.",
        "invalid_params": "Requests with invalid kv_transfer_params, computed locally.",
        "reads_ok": "Batched reads of remote KV blocks that succeeded.",
        "reads_failed": "Batched reads of remote KV blocks that failed.",
        "blocks_read": "KV blocks read from prefill instances.",
        "blocks_failed": "KV blocks whose read failed.",
        "bytes_read": "Bytes read from prefill instances.",
        "loads_ok": "Layer-wise loads completed.",
        "loads_failed": "Layer-wise loads that failed.",
        "blocks_received": "KV blocks received layer by layer.",
        "bytes_pushed": "Bytes pushed to decode instances.",
    }
