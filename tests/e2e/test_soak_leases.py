"""The soak's end check that the KV pool holds no lease (`benchmarks/soaklib/leases.py`), on the
soak's real pool: `mooncake_master` and the standalone client on their namespace hosts.

A read leases its object for the master's lease TTL: asked at once, the check finds the object
held; asked one TTL later, nothing is held and the object is gone.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from harness import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
pytest.importorskip("mooncake.store")

from kvpool_master import master_binary  # noqa: E402
from netns import probe  # noqa: E402
from netns_services import client_binary  # noqa: E402
from soaklib.leases import LEASE_TTL_S, pool_holds  # noqa: E402
from soaklib.parts import Pool  # noqa: E402


def test_a_read_object_is_held_for_one_lease_ttl_then_removable(tmp_path: Path) -> None:
    reason = probe()
    if reason is not None:
        pytest.skip(f"network namespaces unavailable: {reason}")
    if master_binary() is None or client_binary() is None:  # pragma: no cover - in the wheel
        pytest.skip("mooncake_master / mooncake_client not installed")
    from mooncake.store import MooncakeDistributedStore

    with Pool(tmp_path, f"10.205.{os.getpid() % 250}", 10) as pool:
        pool.wait_mounted()
        config = pool.store_config()
        store = MooncakeDistributedStore()
        assert store.setup(
            config["local_hostname"], config["metadata_server"], 0, 16 << 20,
            config["protocol"], "", config["master_server_address"],
        ) == 0  # fmt: skip
        try:
            assert store.put("soak-lease-key", b"x" * 4096) == 0
            assert store.get("soak-lease-key") == b"x" * 4096  # leases it for one TTL
            held = pool_holds(pool, wait_s=0.0)
            assert (held["keys"], held["removed"], held["held"]) == (1, 0, 1), held
            later = pool_holds(pool, wait_s=LEASE_TTL_S + 1.0)
            assert (later["keys"], later["removed"], later["held"]) == (1, 1, 0), later
        finally:
            store.close()
