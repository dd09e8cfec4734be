"""kv_transfer.utils.utils helpers and the stay-put fc3 helper, with a 2-process gloo group."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

from vllm_ascend.distributed.kv_transfer.utils.utils import (  # noqa: E402
    align_memory,
    get_transfer_timeout_value,
    kv_alltoall_and_rearrange,
    rearrange_output,
)

HERE = Path(__file__).resolve().parent


# ---- rearrange_output ------------------------------------------------------------------------


def test_rearrange_interleaves_chunks_row_by_row() -> None:
    # 2 chunks of 3 rows; row i*2 + r of the result is row i of chunk r.
    base = torch.arange(6 * 4).view(6, 4)
    out = rearrange_output(base, cut_num=2, num_kv_heads=2)
    assert out.shape == (6, 2, 2)
    flat = out.reshape(6, 4)
    expected_rows = [0, 3, 1, 4, 2, 5]
    assert torch.equal(flat, base[expected_rows])
    assert out.is_contiguous()


def test_rearrange_with_one_chunk_is_a_reshape() -> None:
    base = torch.randn(5, 2, 8)
    assert torch.equal(rearrange_output(base, 1, 2), base)


@pytest.mark.parametrize(
    ("shape", "cut", "heads", "message"),
    [
        ((5, 4), 2, 2, "divisible by cut_num"),
        ((4, 6), 2, 4, "cannot be split into 4 heads"),
        ((4, 4), 0, 2, "cut_num must be >= 1"),
    ],
)
def test_rearrange_errors(shape: tuple[int, ...], cut: int, heads: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rearrange_output(torch.zeros(shape), cut, heads)


def test_kv_alltoall_is_a_no_op_without_a_tp_ratio() -> None:
    assert kv_alltoall_and_rearrange(1, torch.zeros(2, 1, 1), torch.zeros(2, 1, 1)) == (None, None)
    assert kv_alltoall_and_rearrange(0, None, None) == (None, None)
    with pytest.raises(ValueError, match="both key and value"):
        kv_alltoall_and_rearrange(2, torch.zeros(2, 1, 1), None)


# ---- align_memory ----------------------------------------------------------------------------


@pytest.mark.parametrize("alignment", [2, 64, 512, 4096])
def test_align_memory_returns_an_aligned_view(alignment: int) -> None:
    buf = torch.zeros(8192 + alignment, dtype=torch.int16)
    for start in range(0, 5):  # misalign the input on purpose
        view = buf[start:]
        aligned = align_memory(view, alignment)
        assert aligned.data_ptr() % alignment == 0
        assert aligned.untyped_storage().data_ptr() == buf.untyped_storage().data_ptr()
        assert 0 <= aligned.data_ptr() - view.data_ptr() < alignment


def test_align_memory_errors() -> None:
    with pytest.raises(ValueError, match="1-D contiguous"):
        align_memory(torch.zeros(4, 4), 64)
    with pytest.raises(ValueError, match="positive multiple of 4"):
        align_memory(torch.zeros(16, dtype=torch.float32), 6)
    with pytest.raises(ValueError, match="too short"):
        t = torch.zeros(64, dtype=torch.uint8)
        align_memory(t[1:2], 64)


# ---- get_transfer_timeout_value ----------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("ASCEND_TRANSFER_TIMEOUT", "HCCL_RDMA_TIMEOUT", "HCCL_RDMA_RETRY_CNT"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_timeout_defaults_follow_hccl_defaults(clean_env: pytest.MonkeyPatch) -> None:
    # 4.096 us * 2**20 * 7 retries = 30064.77 ms, floored, + 3000 ms.
    assert get_transfer_timeout_value() == 33064


def test_timeout_from_hccl_settings(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("HCCL_RDMA_TIMEOUT", "18")
    clean_env.setenv("HCCL_RDMA_RETRY_CNT", "3")
    assert get_transfer_timeout_value() == int(4.096 * 2**18 * 3 // 1000) + 3000


def test_explicit_timeout_wins(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ASCEND_TRANSFER_TIMEOUT", "1234")
    clean_env.setenv("HCCL_RDMA_TIMEOUT", "5")
    assert get_transfer_timeout_value() == 1234


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ASCEND_TRANSFER_TIMEOUT", "soon"),
        ("HCCL_RDMA_TIMEOUT", "-1"),
        ("HCCL_RDMA_RETRY_CNT", "0"),
    ],
)
def test_bad_timeout_settings_name_the_variable(
    clean_env: pytest.MonkeyPatch, name: str, value: str
) -> None:
    clean_env.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        get_transfer_timeout_value()


# ---- a real gloo group of 2 processes --------------------------------------------------------


def rank_input(rank: int) -> torch.Tensor:
    # Same construction as gloo_worker.rank_input.
    return torch.arange(4 * 2 * 3, dtype=torch.float32).view(4, 2, 3) + 1000 * rank


@pytest.fixture(scope="module")
def gloo_results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    pytest.importorskip("vllm")
    tmp = tmp_path_factory.mktemp("gloo")
    init_file = tmp / "init"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "gloo_worker.py"),
                str(r),
                "2",
                str(init_file),
                str(tmp / f"{r}.json"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for r in range(2)
    ]
    for p in procs:
        try:
            output, _ = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("gloo workers did not finish within 180 s")
        assert p.returncode == 0, output.decode(errors="replace")[-4000:]
    return [json.loads((tmp / f"{r}.json").read_text()) for r in range(2)]


def test_alltoall_and_rearrange_over_gloo(gloo_results: list[dict[str, Any]]) -> None:
    world, chunk = 2, 2
    inputs = [rank_input(r) for r in range(world)]
    for r, result in enumerate(gloo_results):
        # Rank r receives chunk r of every rank j; row i*world + j is row i of rank j's chunk r.
        expected = torch.stack(
            [inputs[j][r * chunk + i] for i in range(chunk) for j in range(world)]
        )
        assert torch.equal(torch.tensor(result["alltoall"]), expected)
        k, v = result["kv"]
        assert torch.equal(torch.tensor(k), expected)
        assert torch.equal(torch.tensor(v), -expected)
        assert "tp_ratio=3 but the process group has 2 ranks" in str(result["ratio_error"])


def test_fc3_all_gather_and_unpad_over_gloo(gloo_results: list[dict[str, Any]]) -> None:
    inputs = [rank_input(r) for r in range(2)]
    for r, result in enumerate(gloo_results):
        assert torch.equal(torch.tensor(result["fc3_no_ctx"]), inputs[r])
        # DP: rank 0 keeps 3 rows, rank 1 keeps 2.
        assert torch.equal(
            torch.tensor(result["fc3_dp"]), torch.cat([inputs[0][:3], inputs[1][:2]])
        )
        # No DP: the last pad_size=3 rows of the gathered tensor go.
        assert torch.equal(torch.tensor(result["fc3_pad"]), torch.cat(inputs)[:-3])
