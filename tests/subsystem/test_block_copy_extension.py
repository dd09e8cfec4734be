"""The compiled block copier `_block_memmove.copy_blocks` on its own: the plan `pack_plan`
writes, and every malformed argument raising instead of copying (or crashing)."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from types import ModuleType

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

from vllm_ascend.distributed.kv_transfer.utils import block_copy_cpu  # noqa: E402
from vllm_ascend.distributed.kv_transfer.utils.block_copy_cpu import (  # noqa: E402
    chunk_layout,
    pack_plan,
)

NUM_BLOCKS = 6


@pytest.fixture
def ext() -> ModuleType:
    if block_copy_cpu.EXTENSION is None:
        # "could not import": in CI (VAM_STRICT=1, a compiler present) this skip is a failure.
        pytest.skip("could not import the _block_memmove extension (no C compiler at install?)")
    return block_copy_cpu.EXTENSION


@pytest.fixture
def tensors() -> tuple[torch.Tensor, torch.Tensor]:
    """Source and destination `[2 layers, NUM_BLOCKS, 4]` int32, block axis 1."""
    src = torch.arange(2 * NUM_BLOCKS * 4, dtype=torch.int32).view(2, NUM_BLOCKS, 4)
    return src, torch.zeros_like(src)


def words(src: torch.Tensor, dst: torch.Tensor) -> list[int]:
    src_layout, dst_layout = chunk_layout(src, 1), chunk_layout(dst, 1)
    assert src_layout is not None and dst_layout is not None
    plan = pack_plan([(src_layout, dst_layout)], NUM_BLOCKS, NUM_BLOCKS)
    return list(struct.unpack(f"={len(plan) // 8}q", plan))


def pack(values: list[int]) -> bytes:
    return struct.pack(f"={len(values)}q", *values)


def test_pack_plan_writes_the_documented_words(
    tensors: tuple[torch.Tensor, torch.Tensor],
) -> None:
    src, dst = tensors
    per_layer = NUM_BLOCKS * 16  # bytes of one layer
    assert words(src, dst) == [
        NUM_BLOCKS, NUM_BLOCKS, 1,  # block counts, pairs
        src.data_ptr(), dst.data_ptr(), 16, 16, 16, 2,  # addresses, chunk, strides, outer
        0, 0, per_layer, per_layer,  # (source, destination) offset per layer
    ]  # fmt: skip


def test_copy_blocks_copies_and_returns_the_bytes(
    ext: ModuleType, tensors: tuple[torch.Tensor, torch.Tensor]
) -> None:
    src, dst = tensors
    assert ext.copy_blocks(pack(words(src, dst)), (5, 0, 1), [0, 3, 4]) == 3 * 2 * 16
    expected = torch.zeros_like(src)
    expected[:, [0, 3, 4]] = src[:, [5, 0, 1]]
    assert torch.equal(dst, expected)


def test_copy_blocks_accepts_any_sequence_of_integers(
    ext: ModuleType, tensors: tuple[torch.Tensor, torch.Tensor]
) -> None:
    src, dst = tensors
    assert ext.copy_blocks(pack(words(src, dst)), range(2), torch.tensor([4, 5])) == 2 * 2 * 16
    assert torch.equal(dst[:, 4:], src[:, :2])


# Index of each word in `words()`: 0 source blocks, 2 pairs, 5 chunk, 6-7 strides, 8 outer
# count, 9-12 offsets.
MALFORMED: dict[str, Callable[[list[int]], list[int]]] = {
    "negative block count": lambda w: [-1, *w[1:]],
    "negative pair count": lambda w: [*w[:2], -1, *w[3:]],
    "null address": lambda w: [*w[:3], 0, *w[4:]],
    "negative chunk": lambda w: [*w[:5], -16, *w[6:]],
    "negative stride": lambda w: [*w[:6], -16, *w[7:]],
    "negative outer count": lambda w: [*w[:8], -2, *w[9:]],
    "negative offset": lambda w: [*w[:11], -8, *w[12:]],
    "range past the address space": lambda w: [*w[:11], 2**63 - 8, *w[12:]],
    "stride past the address space": lambda w: [*w[:6], 2**62, *w[7:]],
    "truncated offsets": lambda w: w[:-1],
    "truncated pair header": lambda w: w[:6],
    "missing header": lambda w: w[:2],
    "trailing word": lambda w: [*w, 0],
    "more pairs than written": lambda w: [*w[:2], 2, *w[3:]],
}


@pytest.mark.parametrize("edit", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_plan_raises_value_error_and_copies_nothing(
    ext: ModuleType,
    tensors: tuple[torch.Tensor, torch.Tensor],
    edit: Callable[[list[int]], list[int]],
) -> None:
    src, dst = tensors
    plan = pack(edit(words(src, dst)))
    with pytest.raises(ValueError, match="plan"):
        ext.copy_blocks(plan, [0], [0])
    assert not dst.any()


def test_bad_arguments_raise(ext: ModuleType, tensors: tuple[torch.Tensor, torch.Tensor]) -> None:
    src, dst = tensors
    plan = pack(words(src, dst))
    with pytest.raises(ValueError, match="whole number of int64 words"):
        ext.copy_blocks(plan + b"\0", [0], [0])
    with pytest.raises(TypeError, match="plan must be bytes"):
        ext.copy_blocks(bytearray(plan), [0], [0])
    with pytest.raises(TypeError, match="takes 3 arguments"):
        ext.copy_blocks(plan, [0])
    with pytest.raises(TypeError, match="src_ids must be a sequence"):
        ext.copy_blocks(plan, 0, [0])
    with pytest.raises(TypeError, match="integer"):
        ext.copy_blocks(plan, [0, 1.0], [0, 1])
    with pytest.raises(OverflowError):
        ext.copy_blocks(plan, [0], [2**64])
    with pytest.raises(ValueError, match="src_ids has 2 ids but dst_ids has 1"):
        ext.copy_blocks(plan, [0, 1], [0])
    with pytest.raises(IndexError, match=r"^source block id out of range \[0, 6\): span 0..6$"):
        ext.copy_blocks(plan, [0, 6], [0, 1])
    with pytest.raises(IndexError, match=r"^destination block id .* span -2..3$"):
        ext.copy_blocks(plan, [0, 1], [-2, 3])
    assert ext.copy_blocks(plan, [], []) == 0
    assert not dst.any()


def test_a_batch_big_enough_to_release_the_gil_copies_too(ext: ModuleType) -> None:
    """4 MiB per batch: above the size from which the copy runs without the GIL (the other
    branch of the copy; that the GIL is released is not observable without timing)."""
    src = torch.randint(0, 255, (64, 1 << 16), dtype=torch.uint8)
    dst = torch.zeros_like(src)
    src_layout, dst_layout = chunk_layout(src, 0), chunk_layout(dst, 0)
    assert src_layout is not None and dst_layout is not None
    plan = pack_plan([(src_layout, dst_layout)], 64, 64)
    order = list(range(63, -1, -1))
    assert ext.copy_blocks(plan, order, list(range(64))) == 64 << 16
    assert torch.equal(dst, src.flip(0))


def test_ids_that_shrink_their_list_while_read_raise(
    ext: ModuleType, tensors: tuple[torch.Tensor, torch.Tensor]
) -> None:
    src, dst = tensors
    ids: list[object] = []

    class Shrinking:
        def __index__(self) -> int:
            ids.clear()  # the C side must not read the list's old items after this
            return 0

    ids += [Shrinking(), 1, 2]
    with pytest.raises(RuntimeError, match="ids changed size"):
        ext.copy_blocks(pack(words(src, dst)), ids, [0, 1, 2])
    assert not dst.any()


# ---- large batches: copied in source order when the order cannot matter ---------------------

BIG_SRC, BIG_DST, BIG_N = 1500, 1100, 1024  # 1,024 blocks of 2 x 4 KiB: 8 MiB per batch


def big_pair(n_src: int, n_dst: int) -> tuple[torch.Tensor, torch.Tensor, bytes]:
    """Source `[2, n_src, 1024]` and zeroed destination `[2, n_dst, 1024]` int32, and their plan."""
    src = torch.randint(-(2**31), 2**31 - 1, (2, n_src, 1024), dtype=torch.int32)
    dst = torch.zeros((2, n_dst, 1024), dtype=torch.int32)
    src_layout, dst_layout = chunk_layout(src, 1), chunk_layout(dst, 1)
    assert src_layout is not None and dst_layout is not None
    return src, dst, pack_plan([(src_layout, dst_layout)], n_src, n_dst)


def sequential(dst: torch.Tensor, src: torch.Tensor, s_ids: list[int], d_ids: list[int]) -> None:
    """The reference: one block after the other, in the order given."""
    for s, d in zip(s_ids, d_ids, strict=True):
        dst[:, d] = src[:, s]


def test_a_large_scattered_batch_is_copied_exactly(ext: ModuleType) -> None:
    rng = random.Random(3)
    src, dst, plan = big_pair(BIG_SRC, BIG_DST)
    s_ids = rng.sample(sorted(set(range(BIG_SRC)) - {100, 101}), BIG_N - 2)
    d_ids = rng.sample(sorted(set(range(BIG_DST)) - {50, 51}), BIG_N - 2)
    # Adjacent on both sides once sorted by source, far apart as given: sorting merges them.
    s_ids[10:10], d_ids[10:10] = [101], [51]
    s_ids[500:500], d_ids[500:500] = [100], [50]
    assert ext.copy_blocks(plan, s_ids, d_ids) == BIG_N * 2 * 4096
    expected = torch.zeros_like(dst)
    sequential(expected, src, s_ids, d_ids)
    assert torch.equal(dst, expected)


def test_a_large_batch_writing_a_block_twice_keeps_the_last_writer(ext: ModuleType) -> None:
    rng = random.Random(4)
    src, dst, plan = big_pair(BIG_SRC, BIG_DST)
    s_ids = rng.sample(range(BIG_SRC), BIG_N)
    d_ids = rng.sample(range(BIG_DST), BIG_N)
    # Block 7 of the destination is written first from the higher source id, then the lower:
    # copied in source order, the first writer would win.
    d_ids[3], d_ids[900] = 7, 7
    s_ids[3], s_ids[900] = max(s_ids[3], s_ids[900]), min(s_ids[3], s_ids[900])
    ext.copy_blocks(plan, s_ids, d_ids)
    expected = torch.zeros_like(dst)
    sequential(expected, src, s_ids, d_ids)
    assert torch.equal(dst, expected)


def test_a_large_batch_within_one_tensor_keeps_its_order(ext: ModuleType) -> None:
    """Block b -> b + 1 for 1,024 blocks in a shuffled order: each copy may read a block an
    earlier one wrote, so only the given order gives the reference's result."""
    rng = random.Random(5)
    buf = torch.randint(-(2**31), 2**31 - 1, (2, BIG_SRC, 1024), dtype=torch.int32)
    layout = chunk_layout(buf, 1)
    assert layout is not None
    plan = pack_plan([(layout, layout)], BIG_SRC, BIG_SRC)
    s_ids = list(range(BIG_N))
    # No two neighbours in the list may form a run (s, s + 1): runs move as one memmove.
    while any(b == a + 1 for a, b in zip(s_ids, s_ids[1:], strict=False)):
        rng.shuffle(s_ids)
    d_ids = [s + 1 for s in s_ids]
    expected = buf.clone()
    sequential(expected, expected, s_ids, d_ids)
    ext.copy_blocks(plan, s_ids, d_ids)
    assert torch.equal(buf, expected)
