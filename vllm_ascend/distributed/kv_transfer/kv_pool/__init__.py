"""Connectors that keep KV cache blocks in a pool outside the engine's KV cache.

`cpu_offload`: host memory behind vLLM's prefix cache (`CPUOffloadingConnector`).
"""
