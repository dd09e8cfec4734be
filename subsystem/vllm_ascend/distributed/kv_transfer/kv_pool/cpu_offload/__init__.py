"""CPU offload: vLLM KV cache blocks kept in host memory and loaded back on prefix hits.

Modules: `cpu_offload_connector` (the `CPUOffloadingConnector` facade), `scheduler` and
`worker` (its two sides), `cpu_kv_cache_manager` (host block pool, LRU), `metadata` (the ZMQ
metadata server between the sides, called directly from its own process), `messages` (its
requests), `step_metadata` (per-step transfer plan), `config`
(`kv_connector_extra_config` keys).

Nothing is imported here, so that `import ...cpu_offload.metadata` does not pull in vLLM.
"""
