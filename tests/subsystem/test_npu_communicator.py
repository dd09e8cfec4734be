"""NPUCommunicator's collectives on a real 2-process gloo group (the CPU stand-in for HCCL).

Each rank builds inputs from its rank, runs every collective and writes the results as JSON;
the test computes the expected values from the same inputs.
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import types
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("vllm")

WORLD = 2


def rank_input(rank: int) -> Any:
    """[4, 6] float32 whose values encode (rank, row, column)."""
    return torch.arange(24, dtype=torch.float32).view(4, 6) + 100 * rank


def _run_rank(rank: int, init_file: str, out_dir: str) -> None:
    import torch.distributed as dist

    from vllm_ascend.distributed.device_communicators.npu_communicator import NPUCommunicator

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    group = dist.group.WORLD
    comm = NPUCommunicator(group, torch.device("cpu"), group, unique_name="tp:0")
    x = rank_input(rank)
    out: dict[str, Any] = {"rank_in_group": comm.rank_in_group, "world": comm.world_size}
    out["all_reduce"] = comm.all_reduce(x.clone()).tolist()
    out["all_gather_0"] = comm.all_gather(x, dim=0).tolist()
    out["all_gather_1"] = comm.all_gather(x, dim=-1).tolist()
    out["reduce_scatter_0"] = comm.reduce_scatter(x, dim=0).tolist()
    out["reduce_scatter_1"] = comm.reduce_scatter(x, dim=-1).tolist()
    gathered = comm.gather(x, dst=1, dim=0)
    out["gather"] = None if gathered is None else gathered.tolist()
    if rank == 0:
        comm.send(x * 10, dst=1)
    else:
        out["recv"] = comm.recv(x.shape, x.dtype, src=0).tolist()
    out["broadcast"] = comm.broadcast(x.clone(), src=1).tolist()
    out["a2a_equal"] = comm.all_to_all(x, scatter_dim=0, gather_dim=0).tolist()
    out["a2a_dims"] = comm.all_to_all(x, scatter_dim=1, gather_dim=0).tolist()
    # Uneven splits: rank 0 sends rows [1, 3], rank 1 sends rows [2, 2].
    scatter = [[1, 3], [2, 2]][rank]
    gather = [[1, 2], [3, 2]][rank]  # what each rank receives from ranks 0 and 1
    out["a2a_sizes"] = comm.all_to_all(x, 0, 0, scatter, gather).tolist()
    for name, call in {
        "only_one_list": lambda: comm.all_to_all(x, 0, 0, [2, 2], None),
        "bad_sum": lambda: comm.all_to_all(x, 0, 0, [1, 1], [1, 1]),
        "uneven": lambda: comm.all_to_all(x[:3], 0, 0),
        "bad_dim": lambda: comm.all_to_all(x, 5, 0),
    }.items():
        try:
            call()
        except ValueError as exc:
            out[f"error_{name}"] = str(exc)
    dist.barrier()
    dist.destroy_process_group()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(out), encoding="utf-8")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("npu-comm")
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_run_rank, args=(r, str(tmp / "init"), str(tmp))) for r in range(WORLD)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    codes = [p.exitcode for p in procs]
    for p in procs:
        if p.is_alive():
            p.kill()
    assert codes == [0, 0], f"rank exit codes {codes}"
    return [json.loads((tmp / f"rank{r}.json").read_text()) for r in range(WORLD)]


def t(value: Any) -> Any:
    return torch.tensor(value)


def test_group_identity(results: list[dict[str, Any]]) -> None:
    assert [(r["rank_in_group"], r["world"]) for r in results] == [(0, 2), (1, 2)]


def test_all_reduce_all_gather_reduce_scatter(results: list[dict[str, Any]]) -> None:
    x0, x1 = rank_input(0), rank_input(1)
    for r in results:
        assert torch.equal(t(r["all_reduce"]), x0 + x1)
        assert torch.equal(t(r["all_gather_0"]), torch.cat([x0, x1], dim=0))
        assert torch.equal(t(r["all_gather_1"]), torch.cat([x0, x1], dim=1))
    total = x0 + x1
    for rank, r in enumerate(results):
        assert torch.equal(t(r["reduce_scatter_0"]), total.chunk(2, dim=0)[rank])
        assert torch.equal(t(r["reduce_scatter_1"]), total.chunk(2, dim=1)[rank])


def test_gather_send_recv_broadcast(results: list[dict[str, Any]]) -> None:
    x0, x1 = rank_input(0), rank_input(1)
    assert results[0]["gather"] is None
    assert torch.equal(t(results[1]["gather"]), torch.cat([x0, x1], dim=0))
    assert torch.equal(t(results[1]["recv"]), x0 * 10)
    for r in results:
        assert torch.equal(t(r["broadcast"]), x1)


def test_all_to_all(results: list[dict[str, Any]]) -> None:
    x = [rank_input(0), rank_input(1)]
    for rank, r in enumerate(results):
        assert torch.equal(
            t(r["a2a_equal"]), torch.cat([x[0].chunk(2, 0)[rank], x[1].chunk(2, 0)[rank]], 0)
        )
        assert torch.equal(
            t(r["a2a_dims"]), torch.cat([x[0].chunk(2, 1)[rank], x[1].chunk(2, 1)[rank]], 0)
        )
    parts0 = torch.split(x[0], [1, 3], 0)
    parts1 = torch.split(x[1], [2, 2], 0)
    assert torch.equal(t(results[0]["a2a_sizes"]), torch.cat([parts0[0], parts1[0]], 0))
    assert torch.equal(t(results[1]["a2a_sizes"]), torch.cat([parts0[1], parts1[1]], 0))


def test_all_to_all_argument_errors(results: list[dict[str, Any]]) -> None:
    r = results[0]
    assert r["error_only_one_list"] == "give both scatter_sizes and gather_sizes, or neither"
    assert "sum to 2, not 4" in r["error_bad_sum"]
    assert "does not split into 2 parts" in r["error_uneven"]
    assert "out of range" in r["error_bad_dim"]


def test_an_npu_device_needs_torch_npu(monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm_ascend.distributed.device_communicators.npu_communicator import NPUCommunicator

    monkeypatch.setitem(sys.modules, "torch_npu", None)  # import torch_npu -> ImportError
    npu = types.SimpleNamespace(type="npu")  # torch.device("npu") needs torch_npu itself
    with pytest.raises(ImportError):
        NPUCommunicator(None, npu)  # type: ignore[arg-type]
