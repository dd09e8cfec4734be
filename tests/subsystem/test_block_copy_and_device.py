"""Block copies between KV cache layouts and host buffers, and the device abstraction (CPU)."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

from vllm_ascend.distributed.kv_transfer.utils.block_copy import (  # noqa: E402
    BlockTensor,
    copy_blocks,
    find_block_axis,
    host_mirror,
    plan_runs,
    stack_layers,
)
from vllm_ascend.distributed.kv_transfer.utils.device import (  # noqa: E402
    KVDevice,
    iter_kv_tensors,
    npu_available,
    resolve_device,
)


def test_plan_runs_merges_consecutive_pairs_only() -> None:
    assert plan_runs([], []) == []
    assert plan_runs([3, 4, 5, 9], [0, 1, 2, 3]) == [(3, 0, 3), (9, 3, 1)]
    assert plan_runs([1, 2, 3], [5, 7, 8]) == [(1, 5, 1), (2, 7, 2)]
    assert plan_runs([2, 1], [0, 1]) == [(2, 0, 1), (1, 1, 1)]
    with pytest.raises(ValueError, match="src_ids has 2 ids but dst_ids has 1"):
        plan_runs([1, 2], [1])


@pytest.mark.parametrize(
    ("shape", "axis"),
    [
        ((10, 1, 32, 128), 0),  # vLLM CPU backend: [num_blocks, heads, block_size, 2*head_dim]
        ((2, 10, 32, 8, 128), 1),  # split K/V: [2, num_blocks, block_size, heads, head_dim]
    ],
)
def test_find_block_axis(shape: tuple[int, ...], axis: int) -> None:
    assert find_block_axis(torch.empty(shape), 10) == axis


def test_find_block_axis_rejects_unknown_layouts() -> None:
    with pytest.raises(ValueError, match="no leading axis has num_blocks=10"):
        find_block_axis(torch.empty(3, 4, 10), 10)


@pytest.mark.parametrize("layout", ["blocks_first", "kv_first"])
@pytest.mark.parametrize("pattern", ["contiguous", "scattered"])
def test_round_trip_through_a_host_pool(layout: str, pattern: str) -> None:
    num_blocks, num_host = 24, 10
    shape = (num_blocks, 2, 4, 6) if layout == "blocks_first" else (2, num_blocks, 4, 6)
    layers = [torch.randn(shape).to(torch.bfloat16) for _ in range(3)]
    device = [BlockTensor(t, find_block_axis(t, num_blocks)) for t in layers]
    host = [
        host_mirror(d, num_host, lambda shape, dtype: torch.zeros(tuple(shape), dtype=dtype))
        for d in device
    ]
    rng = random.Random(0)
    if pattern == "contiguous":
        src, dst = list(range(5, 13)), list(range(2, 10))
    else:
        src, dst = rng.sample(range(num_blocks), 8), rng.sample(range(num_host), 8)
    nbytes = copy_blocks(list(zip(device, host, strict=True)), src, dst)
    assert nbytes == 8 * sum(d.bytes_per_block for d in device)
    for d, h in zip(device, host, strict=True):
        for s, t in zip(src, dst, strict=True):
            assert torch.equal(h.tensor.select(h.block_axis, t), d.tensor.select(d.block_axis, s))
    # Load back into other device blocks.
    targets = [b for b in range(num_blocks) if b not in src][:8]
    copy_blocks(list(zip(host, device, strict=True)), dst, targets)
    for d in device:
        for s, t in zip(src, targets, strict=True):
            assert torch.equal(d.tensor.select(d.block_axis, t), d.tensor.select(d.block_axis, s))


def test_copy_blocks_checks_sizes_and_ranges() -> None:
    a = BlockTensor(torch.zeros(4, 8), 0)
    b = BlockTensor(torch.zeros(4, 4), 0)
    with pytest.raises(ValueError, match="block size mismatch"):
        copy_blocks([(a, b)], [0], [0])
    c = BlockTensor(torch.zeros(2, 8), 0)
    with pytest.raises(IndexError, match=r"destination block id out of range \[0, 2\)"):
        copy_blocks([(a, c)], [0, 1], [1, 2])
    assert copy_blocks([(a, c)], [], []) == 0


def test_cpu_device_abstraction() -> None:
    t = torch.zeros(4, 2)
    dev = resolve_device([t])
    assert dev.type == "cpu" and not dev.is_accelerator and not dev.non_blocking
    host = dev.empty_host((3, 2), torch.bfloat16)
    assert host.device.type == "cpu" and host.dtype == torch.bfloat16 and not host.is_pinned()
    assert dev.new_stream() is None
    with dev.stream(None):
        pass
    event = dev.record_event()
    assert event.query()
    event.synchronize()
    dev.synchronize()


def test_resolve_device_without_tensors_and_mixed_devices() -> None:
    # Here torch_npu is absent: the fallback is the CPU.
    assert npu_available() is False
    assert resolve_device().type == "cpu"
    with pytest.raises(ValueError, match="span several devices"):
        resolve_device([torch.zeros(1), torch.zeros(1, device="meta")])
    assert repr(KVDevice(torch.device("cpu"))) == "KVDevice(cpu)"


def test_iter_kv_tensors_accepts_tensors_and_pairs() -> None:
    k, v, kv = torch.zeros(1), torch.zeros(2), torch.zeros(3)
    got = list(iter_kv_tensors({"l0": kv, "l1": (k, v)}))
    assert [name for name, _ in got] == ["l0", "l1", "l1"]
    assert got[1][1] is k and got[2][1] is v


def vllm_like_kv_cache(num_layers: int, layer_shape: tuple[int, ...]) -> list[torch.Tensor]:
    """One buffer, one view per layer at a fixed offset: how vLLM allocates a KV cache."""
    per_layer = 1
    for n in layer_shape:
        per_layer *= n
    buf = torch.randn(num_layers * per_layer).to(torch.bfloat16)
    return [buf[i * per_layer : (i + 1) * per_layer].view(layer_shape) for i in range(num_layers)]


@pytest.mark.parametrize("layer_shape", [(12, 2, 4, 16), (2, 12, 4, 2, 8)])
def test_stack_layers_makes_one_strided_view_per_buffer(layer_shape: tuple[int, ...]) -> None:
    layers = vllm_like_kv_cache(5, layer_shape)
    stacked = stack_layers(layers, num_blocks=12)
    assert len(stacked) == 1
    bt = stacked[0]
    assert bt.tensor.shape == (5, *layer_shape)
    assert bt.block_axis == find_block_axis(layers[0], 12) + 1
    assert bt.bytes_per_block == sum(
        BlockTensor(t, find_block_axis(t, 12)).bytes_per_block for t in layers
    )
    for i, t in enumerate(layers):
        assert torch.equal(bt.tensor[i], t)
        assert bt.tensor[i].data_ptr() == t.data_ptr()


def test_stack_layers_keeps_unrelated_tensors_apart() -> None:
    a = vllm_like_kv_cache(2, (6, 4))
    separate = [torch.zeros(6, 4), torch.zeros(6, 8)]
    shared = a[0]
    stacked = stack_layers([*a, *separate, shared], num_blocks=6)
    assert [bt.tensor.shape for bt in stacked] == [(2, 6, 4), (6, 4), (6, 8), (6, 4)]


def test_host_mirror_has_the_device_layout_and_round_trips() -> None:
    layers = vllm_like_kv_cache(4, (2, 10, 4, 2, 8))  # split K/V layout per layer
    (device,) = stack_layers(layers, num_blocks=10)
    host = host_mirror(device, 6, lambda shape, dtype: torch.zeros(tuple(shape), dtype=dtype))
    assert host.num_blocks == 6 and host.bytes_per_block == device.bytes_per_block
    assert host.tensor.shape == (4, 2, 6, 4, 2, 8) and host.tensor.is_contiguous()
    # A run of host blocks is one region per layer and K/V, as on the device side.
    assert host.tensor[1, 0].narrow(0, 2, 3).is_contiguous()
    copy_blocks([(device, host)], [7, 2, 9], [3, 0, 5])
    for s, d in zip([7, 2, 9], [3, 0, 5], strict=True):
        for i, layer in enumerate(layers):
            assert torch.equal(host.tensor[i].select(1, d), layer.select(1, s))
