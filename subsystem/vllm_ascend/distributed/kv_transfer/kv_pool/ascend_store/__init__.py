"""The KV pool: vLLM engines share KV cache blocks through a distributed store.

Modules (each one job):

- `ascend_store_connector`: `AscendStoreConnector` (also registered as
  `MooncakeConnectorStoreV1`), the `KVConnectorBase_V1` facade;
- `config_data`: the connector's config and pool keys (`ChunkedTokenDatabase`); re-exports the
  step metadata under upstream's module name;
- `step_metadata`: what the scheduler side sends the workers each step (`ReqMeta`,
  `AscendConnectorMetadata`);
- `pool_scheduler`: scheduler side (lookups, load and save planning);
- `load_failures`: blocks whose load failed, answered as misses for a while
  (`RecentLoadFailures`);
- `pool_worker`: worker side (loads, saves, completion reporting);
- `save_tracker`: the worker's pending saves per request (`SaveTracker`);
- `load_tracker`: the worker's load errors and deadline-bound asynchronous loads
  (`LoadTracker`);
- `sync_loads`: the worker's synchronous loads, each waited on for at most
  `sync_load_timeout_s` (`SyncLoads`);
- `kv_transfer`: the sending/receiving threads (re-exports the three modules below);
- `block_layout`: block addresses (`KVCacheLayout`);
- `pool_guard`: the failure guard (`PoolGuard`, `RateLimitedLog`);
- `block_io`: batched loads and saves (`load_blocks`, `save_blocks`);
- `stats`: the counters reported to vLLM's metrics (`AscendStoreStats`);
- `backend`: the store clients (`Backend`, `MooncakeBackend`, `MemcacheBackend`).

Nothing is imported here: the connector module imports vLLM and torch, the backends their
store's package only when they connect.
"""
