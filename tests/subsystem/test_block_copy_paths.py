"""`BlockCopier` on each of its paths (the compiled CPU memmove, its memoryview fallback, torch
ops) against a per-block reference: id patterns, layouts (stacked, separate, gapped,
non-contiguous), dtypes, save and load directions, copies within one tensor."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

from vllm_ascend.distributed.kv_transfer.utils import block_copy_cpu  # noqa: E402
from vllm_ascend.distributed.kv_transfer.utils.block_copy import (  # noqa: E402
    BlockCopier,
    BlockTensor,
    host_mirror,
    stack_layers,
)
from vllm_ascend.distributed.kv_transfer.utils.block_copy_cpu import chunk_layout  # noqa: E402

NUM_BLOCKS, NUM_HOST = 40, 24
CPU_PATHS = ["memmove", "memoryview"]


def use_path(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next `BlockCopier` take `path` ("memmove", "memoryview" or "torch")."""
    if path == "memmove" and block_copy_cpu.EXTENSION is None:
        pytest.skip("the _block_memmove extension is not built (no C compiler at install)")
    if path == "memoryview":
        monkeypatch.setattr(block_copy_cpu, "EXTENSION", None)


def one_buffer(num_layers: int, shape: tuple[int, ...], dtype: torch.dtype) -> list[torch.Tensor]:
    """vLLM's allocation: all layers in one buffer, one view per layer."""
    per_layer = 1
    for n in shape:
        per_layer *= n
    buf = torch.randn(num_layers * per_layer).to(dtype)
    return [buf[i * per_layer : (i + 1) * per_layer].view(shape) for i in range(num_layers)]


def kv_tensors(layout: str, dtype: torch.dtype) -> list[BlockTensor]:
    if layout == "cpu_stacked":  # vLLM CPU backend: [num_blocks, heads, block_size, 2*head_dim]
        return stack_layers(one_buffer(3, (NUM_BLOCKS, 2, 4, 16), dtype), NUM_BLOCKS)
    if layout == "split_stacked":  # NPU/GPU: [2, num_blocks, block_size, heads, head_dim]
        return stack_layers(one_buffer(3, (2, NUM_BLOCKS, 4, 2, 8), dtype), NUM_BLOCKS)
    if layout == "separate":  # one allocation per layer: nothing to stack
        tensors = [torch.randn(NUM_BLOCKS, 4, 8).to(dtype) for _ in range(3)]
        return [BlockTensor(t, 0) for t in tensors]
    if layout == "gapped":  # every other block of a buffer: blocks are not adjacent
        return [BlockTensor(torch.randn(2 * NUM_BLOCKS, 4, 8).to(dtype)[::2], 0)]
    # A layer tensor whose block region is not contiguous: a transposed view.
    base = torch.randn(NUM_BLOCKS, 8, 4).to(dtype)
    return [BlockTensor(base.transpose(1, 2), 0)]


def ids(pattern: str, rng: random.Random) -> tuple[list[int], list[int]]:
    if pattern == "one":
        return [17], [5]
    if pattern == "contiguous":
        return list(range(10, 22)), list(range(3, 15))
    if pattern == "scattered":
        return rng.sample(range(NUM_BLOCKS), 12), rng.sample(range(NUM_HOST), 12)
    # mixed: two runs, then singles, then a run whose source goes backwards
    return [4, 5, 6, 30, 31, 9, 2, 25, 26, 27], [0, 1, 2, 10, 11, 20, 7, 15, 16, 17]


def expected_after(
    pairs: list[tuple[BlockTensor, BlockTensor]], src: list[int], dst: list[int]
) -> list[torch.Tensor]:
    out = []
    for s_bt, d_bt in pairs:
        ref = d_bt.tensor.clone()
        for s, d in zip(src, dst, strict=True):
            ref.select(d_bt.block_axis, d).copy_(s_bt.tensor.select(s_bt.block_axis, s))
        out.append(ref)
    return out


def zeros(shape: object, dtype: torch.dtype) -> torch.Tensor:
    return torch.zeros(tuple(shape), dtype=dtype)  # type: ignore[arg-type]


LAYOUTS = ["cpu_stacked", "split_stacked", "separate", "gapped", "strided"]


@pytest.mark.parametrize("path", [*CPU_PATHS, "torch"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("pattern", ["one", "contiguous", "scattered", "mixed"])
def test_save_then_load_matches_a_per_block_copy(
    path: str, dtype: torch.dtype, layout: str, pattern: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_path(path, monkeypatch)
    force_torch = path == "torch"
    device = kv_tensors(layout, dtype)
    host = [host_mirror(d, NUM_HOST, zeros) for d in device]
    src, dst = ids(pattern, random.Random(hash((layout, pattern)) & 0xFFFF))
    save_pairs = list(zip(device, host, strict=True))
    saver = BlockCopier(save_pairs, force_torch=force_torch)
    assert saver.mechanism == ("torch" if layout == "strided" else path)
    expected = expected_after(save_pairs, src, dst)
    assert saver.copy(src, dst) == len(src) * sum(d.bytes_per_block for d in device)
    for h, e in zip(host, expected, strict=True):
        assert torch.equal(h.tensor, e)
    # Load back into other device blocks; nothing else of the KV cache may change.
    targets = [b for b in range(NUM_BLOCKS) if b not in src][: len(dst)]
    load_pairs = [(h, d) for d, h in save_pairs]
    expected = expected_after(load_pairs, dst, targets)
    BlockCopier(load_pairs, force_torch=force_torch).copy(dst, targets)
    for d, e in zip(device, expected, strict=True):
        assert torch.equal(d.tensor, e)
    for d in device:
        for s, t in zip(src, targets, strict=True):
            assert torch.equal(d.tensor.select(d.block_axis, t), d.tensor.select(d.block_axis, s))


@pytest.mark.parametrize("path", CPU_PATHS)
@pytest.mark.parametrize("layout", ["cpu_stacked", "gapped"])
@pytest.mark.parametrize(
    ("src", "dst"), [(range(3, 13), range(5, 15)), (range(5, 15), range(3, 13))]
)
def test_a_copy_within_one_tensor_moves_each_run_like_memmove(
    path: str, layout: str, src: range, dst: range, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Overlapping source and destination blocks (one run shifted by two blocks, both ways):
    the run is read whole before it is written, as torch's gather-then-scatter indexing does,
    also where blocks are not adjacent and are copied one at a time."""
    use_path(path, monkeypatch)
    (kv,) = kv_tensors(layout, torch.bfloat16)
    expected = kv.tensor.clone()
    axis = kv.block_axis
    gathered = expected.index_select(axis, torch.tensor(list(src)))
    expected.index_copy_(axis, torch.tensor(list(dst)), gathered)
    copier = BlockCopier([(kv, kv)])
    assert copier.mechanism == path
    copier.copy(list(src), list(dst))
    assert torch.equal(kv.tensor, expected)


@pytest.mark.parametrize("path", CPU_PATHS)
def test_a_repeated_destination_keeps_the_last_writer(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_path(path, monkeypatch)
    (device,) = kv_tensors("cpu_stacked", torch.float32)
    host = host_mirror(device, NUM_HOST, zeros)
    BlockCopier([(device, host)]).copy([1, 2, 3], [5, 6, 5])
    assert torch.equal(host.tensor.select(1, 5), device.tensor.select(1, 3))


@pytest.mark.parametrize("path", [*CPU_PATHS, "torch"])
def test_out_of_range_ids_copy_nothing(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    use_path(path, monkeypatch)
    (device,) = kv_tensors("split_stacked", torch.float16)
    host = host_mirror(device, NUM_HOST, zeros)
    copier = BlockCopier([(device, host)], force_torch=path == "torch")
    assert copier.mechanism == path
    with pytest.raises(IndexError, match=r"destination block id out of range \[0, 24\)"):
        copier.copy([0, 1], [3, NUM_HOST])
    with pytest.raises(IndexError, match=r"source block id out of range \[0, 40\): span -1"):
        copier.copy([-1], [0])
    with pytest.raises(ValueError, match="src_ids has 2 ids but dst_ids has 1"):
        copier.copy([0, 1], [0])
    assert copier.copy([], []) == 0
    assert not host.tensor.any()


def test_chunk_layout_describes_each_block_as_byte_ranges() -> None:
    layers = one_buffer(2, (2, NUM_BLOCKS, 4, 2, 8), torch.bfloat16)
    (stacked,) = stack_layers(layers, NUM_BLOCKS)
    layout = chunk_layout(stacked.tensor, stacked.block_axis)
    assert layout is not None
    per_kv = NUM_BLOCKS * 4 * 2 * 8 * 2  # bytes of K (or V) of one layer
    assert layout.outer == (0, per_kv, 2 * per_kv, 3 * per_kv)
    assert layout.chunk_bytes == layout.block_stride == 4 * 2 * 8 * 2
    assert chunk_layout(torch.randn(4, 8, 2).transpose(1, 2), 0) is None
    assert chunk_layout(torch.empty(0, 4), 0) is None
    assert chunk_layout(torch.empty(4, 4, device="meta"), 0) is None
