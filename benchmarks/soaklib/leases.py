"""The end-of-run check that the KV pool holds no lease of a finished request.

Mooncake's master leases an object to each reader for `--default_kv_lease_ttl` (10 s by
default) and keeps an object whose put started but never ended as "processing"; while either
holds, the object cannot be removed. After traffic stopped and every engine went idle, the check
waits one lease TTL (every lease a finished request took has run out by then), then asks the
master, through a client of its own on this namespace, to remove every object without forcing
(`remove_all(force=False)`: leased and processing objects are skipped), and reads the master's
key count before and after from its metrics. Keys left are objects something still holds.

The connector's own bookkeeping is covered by the idle check: a request with pending saves or
an unreturned synchronous load keeps its blocks (delayed free), so KV cache usage back at its
idle value means no such hold outlived its request.
"""

from __future__ import annotations

import time
from typing import Any

from netns_services import MASTER_METRICS_PORT

__all__ = ["LEASE_TTL_S", "pool_holds"]

LEASE_TTL_S = 10.0  # mooncake_master's --default_kv_lease_ttl default (the soak keeps it)


def master_metric(pool: Any, name: str) -> float | None:
    """One gauge from the master's metrics (fetched on its host); None when unreadable."""
    services = pool.services
    host = services.master_host
    try:
        text = host.http_get(f"http://{host.address}:{MASTER_METRICS_PORT}/metrics")
    except Exception:  # a dead master: nothing to tell
        return None
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return None


def pool_holds(pool: Any, wait_s: float = LEASE_TTL_S + 2.0) -> dict[str, Any]:
    """`{"keys", "removed", "held", "waited_s"}` (see the module docstring); `held` is None
    when the master could not be asked."""
    time.sleep(wait_s)
    keys = master_metric(pool, "master_key_count")
    from mooncake.store import MooncakeDistributedStore

    store = MooncakeDistributedStore()
    config = pool.store_config()
    rc = store.setup(
        config["local_hostname"],
        config["metadata_server"],
        0,
        4 << 20,
        config["protocol"],
        "",
        config["master_server_address"],
    )
    if rc != 0:
        return {"keys": keys, "removed": None, "held": None, "waited_s": wait_s, "setup_rc": rc}
    try:
        removed = int(store.remove_all(False))
    finally:
        store.close()
    held = master_metric(pool, "master_key_count")
    return {
        "keys": None if keys is None else int(keys),
        "removed": removed,
        "held": None if held is None else int(held),
        "waited_s": wait_s,
    }
