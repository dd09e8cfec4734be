"""Prefill/decode disaggregation over Mooncake's transfer engine.

- `mooncake_connector`: `MooncakeConnector` (registered as `MooncakeConnectorV1`): the decode
  instance reads a finished prefill's KV blocks (pull).
- `mooncake_layerwise_connector`: `MooncakeLayerwiseConnector`: the prefill instance pushes
  each layer's KV as soon as it is computed.

Shared parts: `config` (settings), `kv_params` (the `kv_transfer_params` protocol),
`messages` and `side_channel` (the ZMQ control plane), `tp_mapping` (heterogeneous TP),
`kv_layout` and `transfer_plan` (block addresses), `threads` (daemon transfer threads),
`send_tracker` (prefill blocks held for their readers), `p2p_connector`, `scheduler_base` and
`worker_base` (what the two connectors' classes, scheduler sides and worker sides have in
common). Each mode's own modules carry its name: pull mode (`mooncake_connector`)
`pull_scheduler`, `pull_worker`, `pull_metadata`; layerwise push mode
(`mooncake_layerwise_connector`) `layerwise_scheduler`, `layerwise_worker`,
`layerwise_metadata`, `layerwise_loads`, `layerwise_pushes`. Nothing is imported here: most
modules import vLLM or torch.
"""
