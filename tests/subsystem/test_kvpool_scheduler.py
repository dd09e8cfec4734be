"""The pool's scheduler side with real vLLM objects (config, requests, block hashes, scheduler
output) and a real Mooncake store: lookups, load and save planning, delayed frees, keys, and
blocks whose load failed answered as misses for `failed_load_ttl_s`."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
for _name in ("vllm", "transformers", "tokenizers", "mooncake.store"):
    pytest.importorskip(_name)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from kvpool_fixtures import module_master  # noqa: E402
from kvpool_master import MooncakeMaster  # noqa: E402
from vllm import SamplingParams  # noqa: E402
from vllm.config import KVTransferConfig  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.utils.hashing import sha256  # noqa: E402
from vllm.v1.core.kv_cache_manager import KVCacheBlocks  # noqa: E402
from vllm.v1.core.kv_cache_utils import (  # noqa: E402
    KVCacheBlock,
    get_request_block_hasher,
    init_none_hash,
)
from vllm.v1.core.sched.output import NewRequestData, SchedulerOutput  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheTensor,
)
from vllm.v1.outputs import KVConnectorOutput  # noqa: E402
from vllm.v1.request import Request  # noqa: E402

from tests.subsystem.store_doubles import WrappedBackend  # noqa: E402
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import (  # noqa: E402
    Backend,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.mooncake_backend import (  # noqa: E402
    MooncakeBackend,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.config_data import (  # noqa: E402
    AscendStoreConfig,
    ChunkedTokenDatabase,
    KeyMetadata,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_scheduler import (  # noqa: E402
    KVPoolScheduler,
)

BS = 32
NUM_BLOCKS = 256
BLOCK_BYTES = 16 * 1024


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from tiny_model import build_tiny_llama

    return (
        build_tiny_llama(tmp_path_factory.mktemp("m0"), seed=0),
        build_tiny_llama(tmp_path_factory.mktemp("m1"), seed=1),
    )


def vllm_config(model: Path, role: str = "kv_both") -> Any:
    return EngineArgs(
        model=str(model),
        dtype="bfloat16",
        block_size=BS,
        max_model_len=1024,
        enforce_eager=True,
        kv_transfer_config=KVTransferConfig(kv_connector="AscendStoreConnector", kv_role=role),
    ).create_engine_config()


def kv_cache_config() -> KVCacheConfig:
    spec = FullAttentionSpec(block_size=BS, num_kv_heads=1, head_size=64, dtype=torch.bfloat16)
    layers = ["model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn"]
    return KVCacheConfig(
        num_blocks=NUM_BLOCKS,
        kv_cache_tensors=[
            KVCacheTensor(
                size=NUM_BLOCKS * BLOCK_BYTES,
                layers=layers,
                layer_stride=8192,
                block_stride=BLOCK_BYTES,
            )
        ],
        kv_cache_groups=[KVCacheGroupSpec(layers, spec)],
    )


def request(req_id: str, num_tokens: int, seed: int = 0) -> Request:
    init_none_hash(sha256)
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, 500, (num_tokens,), generator=g).tolist()
    return Request(
        req_id,
        tokens,
        SamplingParams(max_tokens=4),
        None,
        block_hasher=get_request_block_hasher(BS, sha256),
    )


master = module_master()


@pytest.fixture(scope="module")
def store(master: MooncakeMaster) -> Iterator[MooncakeBackend]:
    backend = MooncakeBackend(None, master.store_config(global_segment_size="32MB"))
    yield backend
    backend.close()


@pytest.fixture
def scheduler(
    model_dirs: tuple[Path, Path], master: MooncakeMaster, store: MooncakeBackend
) -> Iterator[KVPoolScheduler]:
    config = AscendStoreConfig.from_extra_config({"mooncake": master.store_config()})
    sched = KVPoolScheduler(vllm_config(model_dirs[0]), kv_cache_config(), config)
    yield sched
    sched.shutdown()


def fill(store: MooncakeBackend, db: ChunkedTokenDatabase, hashes: list[bytes]) -> None:
    value = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    keys = db.keys(hashes, 0, 0)
    assert store.put(keys, [[value.data_ptr()]] * len(keys), [[BLOCK_BYTES]] * len(keys)) == [
        0
    ] * len(keys)


def blocks(ids: list[int]) -> KVCacheBlocks:
    return KVCacheBlocks(([KVCacheBlock(i) for i in ids],))


# ---- keys ------------------------------------------------------------------------------------


def test_keys_name_model_layout_rank_and_prefix(model_dirs: tuple[Path, Path]) -> None:
    kv = kv_cache_config()
    a = KeyMetadata.from_vllm_config(vllm_config(model_dirs[0]), kv, BS)
    again = KeyMetadata.from_vllm_config(vllm_config(model_dirs[0]), kv, BS)
    other = KeyMetadata.from_vllm_config(vllm_config(model_dirs[1]), kv, BS)
    assert a == again  # two engines with the same model agree
    assert a.fingerprint != other.fingerprint  # another model never collides
    named = KeyMetadata.from_vllm_config(vllm_config(model_dirs[0]), kv, BS, "llama-x")
    named_too = KeyMetadata.from_vllm_config(vllm_config(model_dirs[1]), kv, BS, "llama-x")
    assert named == named_too  # a shared namespace stands for the model
    db = ChunkedTokenDatabase(KeyMetadata("m", "f", tp_size=2, pp_size=2), BS)
    assert db.keys([b"\x01\xff"], 1, 0) == ["m/f/tp1-pp0/01ff"]
    assert db.keys_all_ranks([b"\x01", b"\x02"]) == [
        f"m/f/tp{t}-pp{p}/{h}" for h in ("01", "02") for p in (0, 1) for t in (0, 1)
    ]
    assert db.chunk_ranges(70) == [(0, 32), (32, 64)]
    assert list(db.process_tokens(100, [b"\x0a", b"\x0b"], 0, 1)) == [
        (0, 32, "m/f/tp0-pp1/0a"),
        (32, 64, "m/f/tp0-pp1/0b"),
    ]


# ---- lookups ---------------------------------------------------------------------------------


@pytest.mark.parametrize("num_blocks", [1, 8, 30])
def test_one_round_trip_per_lookup_whatever_the_prompt_length(
    scheduler: KVPoolScheduler, store: MooncakeBackend, num_blocks: int
) -> None:
    req = request(f"len{num_blocks}", num_blocks * BS + 5, seed=num_blocks)
    present = max(num_blocks - 1, 0)
    fill(store, scheduler.db, req.block_hashes[:present])
    before = scheduler.num_lookups
    tokens, is_async = scheduler.get_num_new_matched_tokens(req, 0)
    assert scheduler.num_lookups == before + 1
    assert (tokens, is_async) == (present * BS, False)


def test_hit_is_the_leading_run_never_the_last_token_and_beyond_local_hits(
    scheduler: KVPoolScheduler, store: MooncakeBackend
) -> None:
    req = request("gap", 6 * BS, seed=100)  # exactly 6 blocks
    h = req.block_hashes
    fill(store, scheduler.db, [h[0], h[1], h[3], h[4], h[5]])  # block 2 missing
    assert scheduler.get_num_new_matched_tokens(req, 0) == (2 * BS, False)
    assert scheduler.get_num_new_matched_tokens(req, 2 * BS) == (0, False)  # all local
    fill(store, scheduler.db, [h[2]])
    # 6 blocks present, but the prompt's last token must be computed: 5 blocks.
    assert scheduler.get_num_new_matched_tokens(req, 0) == (5 * BS, False)
    assert scheduler.get_num_new_matched_tokens(req, 3 * BS) == (2 * BS, False)
    scheduler.load_async = True
    assert scheduler.get_num_new_matched_tokens(req, 0) == (5 * BS, True)


# ---- load and save planning, delayed frees ---------------------------------------------------


def test_loads_saves_and_delayed_free(scheduler: KVPoolScheduler, store: MooncakeBackend) -> None:
    req = request("plan", 5 * BS + 10, seed=200)  # 5 full prompt blocks
    h = req.block_hashes
    fill(store, scheduler.db, h[:2])
    assert scheduler.get_num_new_matched_tokens(req, BS) == (BS, False)  # block 0 is local
    ids = [40, 41, 42, 43, 44, 45]
    scheduler.update_state_after_alloc(req, blocks(ids), BS)
    out = SchedulerOutput.make_empty()
    out.scheduled_new_reqs = [NewRequestData.from_request(req, (ids,))]
    out.scheduled_new_reqs[0].num_computed_tokens = 2 * BS
    out.num_scheduled_tokens = {"plan": 3 * BS + 10}
    meta = scheduler.build_connector_meta(out)
    (load,) = meta.loads
    assert (load.req_id, load.block_ids, load.block_hashes, load.is_async) == (
        "plan",
        [41],
        [h[1]],
        False,
    )
    (save,) = meta.saves  # blocks 2..4: the ones the pool lacks
    assert (save.block_ids, save.block_hashes) == ([42, 43, 44], h[2:5])
    # The next step plans nothing again, and loads are handed out once.
    out2 = SchedulerOutput.make_empty()
    assert scheduler.build_connector_meta(out2).is_empty()
    out2.preempted_req_ids = {"x", "plan"}
    assert scheduler.build_connector_meta(out2).preempted_req_ids == ["plan", "x"]
    assert scheduler.request_finished(req) is True  # its blocks wait for the saves
    other = request("nosave", 20, seed=3)  # no full block: nothing to save
    scheduler.get_num_new_matched_tokens(other, 0)
    scheduler.update_state_after_alloc(other, blocks([7]), 0)
    assert scheduler.request_finished(other) is False


def test_a_synchronous_load_delays_the_free_even_without_saves(
    scheduler: KVPoolScheduler, store: MooncakeBackend
) -> None:
    # Every full prompt block is in the pool: nothing to save. The workers' store call for a
    # synchronous load may outlast the step's bound and still write into the blocks, so they
    # are freed only once the workers report it returned; an asynchronous load is waited for
    # before the request runs, so it needs no hold.
    for req_id, load_async in (("syncload", False), ("asyncload", True)):
        scheduler.load_async = load_async
        req = request(req_id, 2 * BS + 1, seed=250)
        fill(store, scheduler.db, req.block_hashes[:2])
        assert scheduler.get_num_new_matched_tokens(req, 0) == (2 * BS, load_async)
        ids = [50, 51, 52]
        scheduler.update_state_after_alloc(req, blocks(ids), 2 * BS)
        out = SchedulerOutput.make_empty()
        out.scheduled_new_reqs = [NewRequestData.from_request(req, (ids,))]
        out.num_scheduled_tokens = {req_id: 2 * BS + 1}
        meta = scheduler.build_connector_meta(out)
        assert [(m.block_ids, m.is_async) for m in meta.loads] == [([50, 51], load_async)]
        assert meta.saves == []
        assert scheduler.request_finished(req) is (not load_async)


def test_a_consumer_only_engine_never_saves(
    model_dirs: tuple[Path, Path], master: MooncakeMaster
) -> None:
    config = AscendStoreConfig.from_extra_config({"mooncake": master.store_config()})
    sched = KVPoolScheduler(vllm_config(model_dirs[0], "kv_consumer"), kv_cache_config(), config)
    try:
        req = request("consumer", 3 * BS + 1, seed=300)
        assert sched.get_num_new_matched_tokens(req, 0) == (0, False)
        sched.update_state_after_alloc(req, blocks([1, 2, 3, 4]), 0)
        out = SchedulerOutput.make_empty()
        out.scheduled_new_reqs = [NewRequestData.from_request(req, ([1, 2, 3, 4],))]
        out.num_scheduled_tokens = {"consumer": 3 * BS + 1}
        assert sched.build_connector_meta(out).saves == []
        assert sched.request_finished(req) is False
    finally:
        sched.shutdown()


# ---- blocks whose load failed: misses for failed_load_ttl_s ---------------------------------


class CountingBackend(WrappedBackend):
    """Test double: the real store, recording the keys of every `exists` call."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.exists_calls: list[list[str]] = []

    def exists(self, keys: Sequence[str]) -> list[int]:
        self.exists_calls.append(list(keys))
        return self.inner.exists(keys)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


TTL_S = 10.0


@pytest.fixture
def counted(
    model_dirs: tuple[Path, Path], master: MooncakeMaster
) -> Iterator[tuple[KVPoolScheduler, CountingBackend, FakeClock]]:
    config = AscendStoreConfig.from_extra_config(
        {"mooncake": master.store_config(), "failed_load_ttl_s": TTL_S}
    )
    backend = CountingBackend(MooncakeBackend(None, master.store_config(), lookup_only=True))
    clock = FakeClock()
    sched = KVPoolScheduler(
        vllm_config(model_dirs[0]), kv_cache_config(), config, backend=backend, clock=clock
    )
    yield sched, backend, clock
    sched.shutdown()


def plan_load(sched: KVPoolScheduler, req: Request, ids: list[int], hit_blocks: int) -> list[int]:
    """Look `req` up, allocate `ids`, build the step: the block ids of the planned load."""
    assert sched.get_num_new_matched_tokens(req, 0) == (hit_blocks * BS, False)
    sched.update_state_after_alloc(req, blocks(ids), hit_blocks * BS)
    out = SchedulerOutput.make_empty()
    out.scheduled_new_reqs = [NewRequestData.from_request(req, (ids,))]
    out.num_scheduled_tokens = {req.request_id: 1}
    (load,) = sched.build_connector_meta(out).loads
    sched.request_finished(req)
    return load.block_ids


def test_a_failed_load_is_a_miss_without_asking_the_store_until_the_ttl_ends(
    counted: tuple[KVPoolScheduler, CountingBackend, FakeClock], store: MooncakeBackend
) -> None:
    sched, backend, clock = counted
    req = request("dead-host", 4 * BS + 5, seed=500)
    fill(store, sched.db, req.block_hashes[:4])
    loaded = plan_load(sched, req, [60, 61, 62, 63, 64], 4)
    assert loaded == [60, 61, 62, 63] and len(backend.exists_calls) == 1
    sched.take_stats()
    # The workers report the whole load failed (and a block id this side never loaded into).
    sched.update_connector_output(KVConnectorOutput(invalid_block_ids={*loaded, 7}))
    again = request("dead-host-2", 4 * BS + 5, seed=500)  # same prompt, same hashes
    assert sched.get_num_new_matched_tokens(again, 0) == (0, False)
    assert len(backend.exists_calls) == 1  # answered without asking the store
    stats = sched.take_stats()
    assert stats is not None and stats.data.get("failed_load_misses") == 4
    assert "lookups" not in stats.data
    clock.now += TTL_S - 0.5
    assert sched.get_num_new_matched_tokens(again, 0) == (0, False)
    assert len(backend.exists_calls) == 1
    clock.now += 0.5  # the TTL is over: the store is asked again, and still lists them
    assert sched.get_num_new_matched_tokens(again, 0) == (4 * BS, False)
    assert len(backend.exists_calls) == 2


def test_only_the_failed_blocks_skip_the_store(
    counted: tuple[KVPoolScheduler, CountingBackend, FakeClock], store: MooncakeBackend
) -> None:
    sched, backend, _ = counted
    req = request("partial", 5 * BS + 5, seed=501)
    h = req.block_hashes
    fill(store, sched.db, h[:5])
    loaded = plan_load(sched, req, [70, 71, 72, 73, 74, 75], 5)
    sched.update_connector_output(KVConnectorOutput(invalid_block_ids={loaded[2]}))
    present = sched.lookup(h[:5])
    # The hit ends at the failed block; the others are still asked (to skip their saves).
    assert present == [True, True, False, True, True]
    assert backend.exists_calls[-1] == sched.db.keys_all_ranks([h[0], h[1], h[3], h[4]])
    # Nothing reported failed, or an empty report, changes nothing.
    sched.update_connector_output(KVConnectorOutput())
    assert sched.lookup([h[0]]) == [True]


def test_a_failed_block_is_saved_again_when_its_request_computes_it(
    counted: tuple[KVPoolScheduler, CountingBackend, FakeClock], store: MooncakeBackend
) -> None:
    sched, _, _ = counted
    req = request("resave", 3 * BS + 5, seed=502)
    h = req.block_hashes
    fill(store, sched.db, h[:3])
    loaded = plan_load(sched, req, [80, 81, 82, 83], 3)
    sched.update_connector_output(KVConnectorOutput(invalid_block_ids=set(loaded)))
    retry = request("resave-2", 3 * BS + 5, seed=502)
    assert sched.get_num_new_matched_tokens(retry, 0) == (0, False)
    ids = [90, 91, 92, 93]
    sched.update_state_after_alloc(retry, blocks(ids), 0)
    out = SchedulerOutput.make_empty()
    out.scheduled_new_reqs = [NewRequestData.from_request(retry, (ids,))]
    out.num_scheduled_tokens = {"resave-2": 3 * BS + 5}
    (save,) = sched.build_connector_meta(out).saves
    assert (save.block_ids, save.block_hashes) == ([90, 91, 92], h[:3])
    sched.request_finished(retry)
