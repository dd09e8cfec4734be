"""The deadline of the KV pool's asynchronous loads (`load_timeout_s`), on a real pool worker over
a real `mooncake_master`.

The store call that hangs is simulated by `DelayingBackend`, a test double wrapped around the
real `MooncakeBackend`: its `get` waits (until released or for `delay_s`) before delegating;
everything else goes straight to the real store. The hung call is still in progress when the
worker reports the load finished and failed: the deadline, not the store, ended the wait.
"""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
for _name in ("vllm", "transformers", "tokenizers", "mooncake.store"):
    pytest.importorskip(_name)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from kvpool_fixtures import module_master  # noqa: E402
from kvpool_master import MooncakeMaster  # noqa: E402
from vllm.config import KVTransferConfig  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheTensor,
)

from tests.polling import wait_until  # noqa: E402
from tests.subsystem.store_doubles import WrappedBackend  # noqa: E402
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import (  # noqa: E402
    Backend,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.mooncake_backend import (  # noqa: E402
    MooncakeBackend,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.config_data import (  # noqa: E402
    AscendStoreConfig,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_worker import (  # noqa: E402
    KVPoolWorker,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.step_metadata import (  # noqa: E402
    AscendConnectorMetadata,
    ReqMeta,
)

BS = 32
NUM_BLOCKS = 16
LAYERS = ["model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn"]
# Per layer and block: K and V of 32 tokens x 1 head x 64 dims in bf16 = 8 KiB.
BLOCK_BYTES = len(LAYERS) * 2 * BS * 64 * 2
BOUND_S = 30.0  # how long a test waits for anything before it fails


class DelayingBackend(WrappedBackend):
    """Test double: the real store behind a `get` that first waits `delay_s` seconds (or until
    `release` is set); every other call is delegated unchanged."""

    def __init__(self, inner: Backend, delay_s: float) -> None:
        super().__init__(inner)
        self.delay_s = delay_s
        self.release = threading.Event()
        self.gets_started = 0
        self.gets_returned = 0
        self.in_get = threading.Event()

    def get(
        self, keys: Sequence[str], addrs: Sequence[Sequence[int]], sizes: Sequence[Sequence[int]]
    ) -> list[int]:
        self.gets_started += 1
        self.in_get.set()
        try:
            self.release.wait(self.delay_s)
            return self.inner.get(keys, addrs, sizes)
        finally:
            self.gets_returned += 1
            self.in_get.clear()

    def close(self) -> None:
        self.release.set()
        self.inner.close()


def kv_cache_config() -> KVCacheConfig:
    spec = FullAttentionSpec(block_size=BS, num_kv_heads=1, head_size=64, dtype=torch.bfloat16)
    return KVCacheConfig(
        num_blocks=NUM_BLOCKS,
        kv_cache_tensors=[
            KVCacheTensor(
                size=NUM_BLOCKS * BLOCK_BYTES,
                layers=LAYERS,
                layer_stride=BLOCK_BYTES // len(LAYERS),
                block_stride=BLOCK_BYTES,
            )
        ],
        kv_cache_groups=[KVCacheGroupSpec(LAYERS, spec)],
    )


def kv_caches() -> dict[str, torch.Tensor]:
    return {name: torch.zeros(2, NUM_BLOCKS, BS, 1, 64, dtype=torch.bfloat16) for name in LAYERS}


master = module_master()


@pytest.fixture(scope="module")
def vllm_config(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tiny_model import build_tiny_llama

    model = build_tiny_llama(tmp_path_factory.mktemp("tiny"))
    return EngineArgs(
        model=str(model),
        dtype="bfloat16",
        block_size=BS,
        max_model_len=1024,
        enforce_eager=True,
        kv_transfer_config=KVTransferConfig(kv_connector="AscendStoreConnector", kv_role="kv_both"),
    ).create_engine_config()


@pytest.fixture
def delaying(vllm_config: Any, master: MooncakeMaster) -> Iterator[DelayingBackend]:
    backend = DelayingBackend(
        MooncakeBackend(None, master.store_config(global_segment_size="32MB")), delay_s=120.0
    )
    yield backend
    backend.close()


def make_worker(
    vllm_config: Any, master: MooncakeMaster, backend: Backend, caches: dict[str, torch.Tensor]
) -> KVPoolWorker:
    config = AscendStoreConfig.from_extra_config(
        {"mooncake": master.store_config(), "load_async": True, "load_timeout_s": 1}
    )
    worker = KVPoolWorker(vllm_config, kv_cache_config(), config, backend=backend, ranks=(0, 0))
    worker.register_kv_caches(caches)
    return worker


def block_bytes(worker: KVPoolWorker, block_id: int) -> bytes:
    import ctypes

    assert worker.layout is not None
    addrs, sizes = worker.layout.segments(block_id)
    return b"".join(ctypes.string_at(a, n) for a, n in zip(addrs, sizes, strict=True))


def poll_finished(worker: KVPoolWorker, until: Callable[[set[str]], bool]) -> set[str]:
    """Call `get_finished` as vLLM's engine steps do until `until(received so far)`; fails
    after `BOUND_S`."""
    received: set[str] = set()

    def step() -> bool:
        if until(received):
            return True
        _, recving = worker.get_finished(set())
        received.update(recving or set())
        return False

    wait_until(step, BOUND_S, lambda: f"the loads finished (only {received} were)", 0.02)
    return received


def hashes(n: int) -> list[bytes]:
    return [uuid.uuid4().bytes for _ in range(n)]


def test_a_hung_load_fails_at_its_deadline_and_its_late_result_is_dropped(
    vllm_config: Any, master: MooncakeMaster, delaying: DelayingBackend
) -> None:
    caches = kv_caches()
    worker = make_worker(vllm_config, master, delaying, caches)
    try:
        # The prefix is in the pool: written by the real store client from other memory.
        src = torch.randn(3, BLOCK_BYTES // 2).to(torch.bfloat16)
        hung_hashes, queued_hashes, later_hashes = hashes(3), hashes(2), hashes(3)
        keys = worker.db.keys(hung_hashes + later_hashes, 0, 0)
        delaying.inner.register_buffer([src.data_ptr()], [src.nbytes])
        segs = [[src[i % 3].data_ptr()] for i in range(6)]
        assert delaying.inner.put(keys, segs, [[BLOCK_BYTES]] * 6) == [0] * 6

        hung = ReqMeta("hung", [3, 4, 5], hung_hashes, is_async=True)
        queued = ReqMeta("queued", [6, 7], queued_hashes, is_async=True)  # behind the hung one
        worker.start_load_kv(AscendConnectorMetadata(loads=[hung, queued]))
        finished = poll_finished(worker, lambda got: {"hung", "queued"} <= got)
        # Reported while the store call is still hung: the deadline ended the wait.
        assert delaying.in_get.is_set() and delaying.gets_returned == 0
        assert finished == {"hung", "queued"}
        assert worker.get_block_ids_with_load_errors() == {3, 4, 5, 6, 7}
        assert worker.stats()["load_failed_blocks"] == 5

        # The store answers again: the hung call returns, its result is dropped, and the
        # queued load (past its deadline) makes no store call. A fresh load works.
        delaying.release.set()
        later = ReqMeta("later", [8, 9, 10], later_hashes, is_async=True)
        worker.start_load_kv(AscendConnectorMetadata(loads=[later]))
        assert poll_finished(worker, lambda got: "later" in got) == {"later"}
        assert delaying.gets_started == 2  # hung + later; the queued load never reached it
        assert worker.get_block_ids_with_load_errors() == set()
        assert worker.stats()["loaded_blocks"] == 3
        for i, block_id in enumerate([8, 9, 10]):
            assert block_bytes(worker, block_id) == src[i].view(torch.uint8).numpy().tobytes()
        assert delaying.gets_returned == 2  # the hung call did return, and was not reported
    finally:
        delaying.release.set()
        worker.shutdown()


def test_a_hung_synchronous_load_holds_the_step_at_most_its_bound_and_its_blocks_until_it_returns(
    vllm_config: Any, master: MooncakeMaster, delaying: DelayingBackend
) -> None:
    # A pool host cut off the network: the store's get waits for its own transfer timeouts
    # (Mooncake: seconds). The step waits `sync_load_timeout_s`, then the blocks fail as load
    # errors (vLLM recomputes them); the request keeps its blocks until the call returned.
    import time

    caches = kv_caches()
    config = AscendStoreConfig.from_extra_config(
        {"mooncake": master.store_config(), "sync_load_timeout_s": 0.3}
    )
    worker = KVPoolWorker(vllm_config, kv_cache_config(), config, backend=delaying, ranks=(0, 0))
    worker.register_kv_caches(caches)
    try:
        hung = ReqMeta("hung", [3, 4], hashes(2))
        started = time.monotonic()
        worker.start_load_kv(AscendConnectorMetadata(loads=[hung]))
        waited = time.monotonic() - started
        assert delaying.in_get.is_set() and delaying.gets_returned == 0
        assert waited < 0.3 + 1.0, f"the step waited {waited:.1f} s on a hung store"
        assert worker.get_block_ids_with_load_errors() == {3, 4}
        # While that call is stuck, the next step's load is a failure at once (no second call).
        started = time.monotonic()
        worker.start_load_kv(AscendConnectorMetadata(loads=[ReqMeta("next", [5], hashes(1))]))
        assert time.monotonic() - started < 0.3
        assert worker.get_block_ids_with_load_errors() == {5}
        assert delaying.gets_started == 1
        # Finished on the scheduler: "next" never reached the store and is freed at once;
        # "hung" waits for its store call, which may still write into blocks 3 and 4.
        assert worker.get_finished({"hung", "next"}) == ({"next"}, None)
        delaying.release.set()
        wait_until(lambda: delaying.gets_returned == 1, BOUND_S, lambda: "the call returned")
        assert poll_sending(worker) == {"hung"}
    finally:
        delaying.release.set()
        worker.shutdown()


def poll_sending(worker: KVPoolWorker) -> set[str]:
    """`finished_sending` of the first `get_finished` call that reports any (fails after
    `BOUND_S`)."""
    got: set[str] = set()

    def step() -> bool:
        sending, _ = worker.get_finished(set())
        got.update(sending or set())
        return bool(got)

    wait_until(step, BOUND_S, lambda: "a request reported in finished_sending", 0.02)
    return got
