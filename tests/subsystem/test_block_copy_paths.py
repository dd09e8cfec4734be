"""`BlockCopier` on both of its paths (CPU memmove, torch ops) against a per-block reference:
id patterns, layouts (stacked, separate, non-contiguous), dtypes, save and load directions."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

from vllm_ascend.distributed.kv_transfer.utils.block_copy import (  # noqa: E402
    BlockCopier,
    BlockTensor,
    host_mirror,
    stack_layers,
)
from vllm_ascend.distributed.kv_transfer.utils.block_copy_cpu import chunk_layout  # noqa: E402

NUM_BLOCKS, NUM_HOST = 40, 24


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


@pytest.mark.parametrize("force_torch", [False, True], ids=["memmove", "torch"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("layout", ["cpu_stacked", "split_stacked", "separate", "strided"])
@pytest.mark.parametrize("pattern", ["one", "contiguous", "scattered", "mixed"])
def test_save_then_load_matches_a_per_block_copy(
    force_torch: bool, dtype: torch.dtype, layout: str, pattern: str
) -> None:
    device = kv_tensors(layout, dtype)
    host = [host_mirror(d, NUM_HOST, zeros) for d in device]
    src, dst = ids(pattern, random.Random(hash((layout, pattern)) & 0xFFFF))
    save_pairs = list(zip(device, host, strict=True))
    saver = BlockCopier(save_pairs, force_torch=force_torch)
    want = "torch" if force_torch or layout == "strided" else "memmove"
    assert saver.mechanism == want
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


def test_a_repeated_destination_keeps_the_last_writer() -> None:
    (device,) = kv_tensors("cpu_stacked", torch.float32)
    host = host_mirror(device, NUM_HOST, zeros)
    BlockCopier([(device, host)]).copy([1, 2, 3], [5, 6, 5])
    assert torch.equal(host.tensor.select(1, 5), device.tensor.select(1, 3))


def test_out_of_range_ids_copy_nothing() -> None:
    (device,) = kv_tensors("split_stacked", torch.float16)
    host = host_mirror(device, NUM_HOST, zeros)
    copier = BlockCopier([(device, host)])
    with pytest.raises(IndexError, match=r"destination block id out of range \[0, 24\)"):
        copier.copy([0, 1], [3, NUM_HOST])
    with pytest.raises(IndexError, match=r"source block id out of range \[0, 40\): span -1"):
        copier.copy([-1], [0])
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
