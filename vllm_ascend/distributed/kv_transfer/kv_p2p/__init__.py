"""Prefill/decode disaggregation over Mooncake's transfer engine.

- `mooncake_connector`: `MooncakeConnector` (registered as `MooncakeConnectorV1`): the decode
  instance reads a finished prefill's KV blocks.
- `mooncake_layerwise_connector`: `MooncakeLayerwiseConnector`: the prefill instance pushes
  each layer's KV as soon as it is computed.

Shared parts: `config` (settings), `messages` and `side_channel` (the ZMQ control plane),
`tp_mapping` (heterogeneous TP), `kv_layout` and `transfer_plan` (block addresses),
`scheduler`/`worker` (pull mode). Nothing is imported here: each module imports vLLM or torch.
"""
