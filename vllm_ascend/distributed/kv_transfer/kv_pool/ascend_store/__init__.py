"""The KV pool: vLLM engines share KV cache blocks through a distributed store.

Modules (each one job):

- `ascend_store_connector`: `AscendStoreConnector` (also registered as
  `MooncakeConnectorStoreV1`), the `KVConnectorBase_V1` facade;
- `config_data`: the connector's config, pool keys (`ChunkedTokenDatabase`) and step metadata;
- `pool_scheduler`: scheduler side (lookups, load and save planning);
- `pool_worker`: worker side (loads, saves, completion reporting);
- `kv_transfer`: block addresses, the failure guard and the sending/receiving threads;
- `backend`: the store clients (`Backend`, `MooncakeBackend`, `MemcacheBackend`).

Nothing is imported here: the connector module imports vLLM and torch, the backends their
store's package only when they connect.
"""
