"""Connectors that keep KV cache blocks in a pool outside the engine's KV cache.

`cpu_offload`: host memory behind vLLM's prefix cache (`CPUOffloadingConnector`).
`ascend_store`: a pool shared by engines on Mooncake or MemCache (`AscendStoreConnector`).
`ucm_connector`: an adapter onto UCM's own connector (`UCMConnectorV1`).
"""
