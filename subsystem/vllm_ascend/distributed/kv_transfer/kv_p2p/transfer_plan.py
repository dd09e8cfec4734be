"""Turn "these blocks, these heads" into Mooncake's batched transfer lists.

Both sides describe their KV cache as an `AgentMetadata` (regions, block strides and lengths,
heads per block). A transfer of local blocks `local_ids[i]` from remote blocks `remote_ids[i]`
for a set of `HeadSlice`s becomes three parallel lists (local addresses, remote addresses,
lengths in bytes) for `batch_read`/`batch_write`.

Whole blocks of packed regions (stride == length on both sides) whose ids are consecutive on
both sides are merged into one entry: fewer, larger transfers, which is what RDMA and TCP both
prefer.
"""

from __future__ import annotations

from collections.abc import Sequence

from vllm_ascend.distributed.kv_transfer.kv_p2p.messages import AgentMetadata
from vllm_ascend.distributed.kv_transfer.kv_p2p.tp_mapping import HeadSlice

__all__ = ["TransferLists", "block_runs", "check_compatible", "plan_transfer"]

TransferLists = tuple[list[int], list[int], list[int]]


def check_compatible(local: AgentMetadata, remote: AgentMetadata) -> None:
    """Raise unless the two KV caches have the same regions and head size.

    Raises:
        ValueError: different region counts or per-head bytes (different models, dtypes or
            block sizes on the two sides).
    """
    if len(local.region_bases) != len(remote.region_bases):
        raise ValueError(
            f"KV layouts differ: {len(local.region_bases)} regions here, "
            f"{len(remote.region_bases)} on {remote.engine_id} rank {remote.tp_rank}"
        )
    if local.block_size != remote.block_size:
        raise ValueError(
            f"block sizes differ: {local.block_size} tokens here, {remote.block_size} remote"
        )
    for region, (here, there) in enumerate(zip(local.block_lens, remote.block_lens, strict=True)):
        if here // local.kv_heads != there // remote.kv_heads:
            raise ValueError(
                f"KV head sizes differ in region {region}: {here // local.kv_heads} bytes "
                f"here, {there // remote.kv_heads} bytes remote"
            )


def block_runs(local_ids: Sequence[int], remote_ids: Sequence[int]) -> list[tuple[int, int, int]]:
    """`(local_start, remote_start, count)` runs of ids consecutive on both sides."""
    runs: list[tuple[int, int, int]] = []
    for here, there in zip(local_ids, remote_ids, strict=True):
        if runs:
            start_here, start_there, count = runs[-1]
            if here == start_here + count and there == start_there + count:
                runs[-1] = (start_here, start_there, count + 1)
                continue
        runs.append((here, there, 1))
    return runs


def _whole_slices(
    local: AgentMetadata,
    remote: AgentMetadata,
    local_ids: Sequence[int],
    remote_ids: Sequence[int],
    slices: Sequence[HeadSlice],
) -> list[bool]:
    # Check what plan_transfer promises to raise; per slice: does it move every head?
    if len(local_ids) != len(remote_ids):
        raise ValueError(f"{len(local_ids)} local blocks for {len(remote_ids)} remote blocks")
    for ids, meta, side in ((local_ids, local, "local"), (remote_ids, remote, "remote")):
        if ids and (min(ids) < 0 or max(ids) >= meta.num_blocks):
            raise ValueError(f"{side} block id out of range [0, {meta.num_blocks})")
    check_compatible(local, remote)
    whole = [
        s.src_head == 0 and s.dst_head == 0 and s.num_heads == local.kv_heads == remote.kv_heads
        for s in slices
    ]
    if not all(whole) and not (local.head_major and remote.head_major):
        raise ValueError(
            "prefill and decode hold different KV heads per block, which needs a head-major "
            "KV block layout on both sides"
        )
    return whole


def plan_transfer(
    local: AgentMetadata,
    remote: AgentMetadata,
    local_ids: Sequence[int],
    remote_ids: Sequence[int],
    slices: Sequence[HeadSlice],
    regions: Sequence[int] | None = None,
) -> TransferLists:
    """The batched transfer lists that move `slices` of `remote_ids` into `local_ids`.

    Args:
        local: this worker's KV cache.
        remote: the peer's KV cache.
        local_ids: local block ids, one per remote block.
        remote_ids: remote block ids.
        slices: heads to move (all from this `remote`).
        regions: region indices to include (default: all); the layerwise connector moves one
            layer's regions at a time.

    Returns:
        `(local_addrs, remote_addrs, lengths)`.

    Raises:
        ValueError: the id lists differ in length, an id is out of range, the layouts are
            incompatible, or a partial-head slice needs a layout that is not head-major.
    """
    whole = _whole_slices(local, remote, local_ids, remote_ids, slices)
    runs = block_runs(local_ids, remote_ids)
    local_addrs: list[int] = []
    remote_addrs: list[int] = []
    lengths: list[int] = []
    for region in range(len(local.region_bases)) if regions is None else regions:
        l_base, l_stride = local.region_bases[region], local.block_strides[region]
        r_base, r_stride = remote.region_bases[region], remote.block_strides[region]
        head = local.block_lens[region] // local.kv_heads
        packed = l_stride == local.block_lens[region] and r_stride == remote.block_lens[region]
        for piece, is_whole in zip(slices, whole, strict=True):
            l_off, r_off = piece.dst_head * head, piece.src_head * head
            size = piece.num_heads * head
            for here, there, count in runs:
                if is_whole and packed:
                    local_addrs.append(l_base + here * l_stride)
                    remote_addrs.append(r_base + there * r_stride)
                    lengths.append(count * size)
                    continue
                for i in range(count):
                    local_addrs.append(l_base + (here + i) * l_stride + l_off)
                    remote_addrs.append(r_base + (there + i) * r_stride + r_off)
                    lengths.append(size)
    return local_addrs, remote_addrs, lengths
