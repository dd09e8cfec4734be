"""Which prefill rank each decode rank reads each KV head from, for any supported TP pairing.

vLLM shards KV heads over tensor-parallel ranks: with `H` KV heads and TP size `t`, rank `r`
holds heads `[r*H/t, (r+1)*H/t)` when `H >= t` (`H % t == 0`), and the single head
`r // (t/H)` when `H < t` (`t % H == 0`; each head is replicated on `t/H` ranks; MLA's latent
cache is the case `H = 1`).

A decode rank needs its own heads; each comes from exactly one prefill rank that holds it (a
replicated head is taken from replica `decode_rank % replicas`, spreading the load). The plan
for one decode rank is a list of `HeadSlice`s: a run of heads that are consecutive on both
sides, read from one prefill rank.

A prefill rank frees a request's blocks once every decode rank that reads from it said it is
done (`ReadDone`). Prefill ranks that no decode rank reads from (replicas not chosen) still
hold the blocks, so each of them is assigned one decode rank that only notifies it:
`notified_prefill_ranks` and `expected_notifications` give both sides the same answer.

Supported pairings: both sizes shard `H` as above, and the larger TP size is a multiple of
the smaller. Anything else raises `TPMappingError` naming both sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "HeadSlice",
    "TPMappingError",
    "expected_notifications",
    "heads_of_rank",
    "local_kv_heads",
    "notified_prefill_ranks",
    "plan_decode_rank",
    "validate_pairing",
]


class TPMappingError(ValueError):
    """An unsupported combination of prefill TP size, decode TP size and KV head count."""


@dataclass(frozen=True)
class HeadSlice:
    """`num_heads` heads read from `prefill_rank`.

    Attributes:
        prefill_rank: the prefill TP rank to read from.
        src_head: offset of the first head among that prefill rank's local heads.
        dst_head: offset of the first head among the decode rank's local heads.
        num_heads: how many consecutive heads.
    """

    prefill_rank: int
    src_head: int
    dst_head: int
    num_heads: int


def _check_sharding(total_heads: int, tp_size: int, side: str) -> None:
    if tp_size < 1:
        raise TPMappingError(f"{side} tp_size must be >= 1, got {tp_size}")
    if total_heads < 1:
        raise TPMappingError(f"the model must have >= 1 KV head, got {total_heads}")
    if total_heads >= tp_size and total_heads % tp_size:
        raise TPMappingError(
            f"{side} tp_size={tp_size} does not divide the model's {total_heads} KV heads"
        )
    if total_heads < tp_size and tp_size % total_heads:
        raise TPMappingError(
            f"{side} tp_size={tp_size} is not a multiple of the model's {total_heads} KV heads"
        )


def validate_pairing(prefill_tp: int, decode_tp: int, total_heads: int) -> None:
    """Raise unless KV can move from `prefill_tp` ranks to `decode_tp` ranks.

    Raises:
        TPMappingError: one line naming both sizes and the reason.
    """
    try:
        _check_sharding(total_heads, prefill_tp, "prefill")
        _check_sharding(total_heads, decode_tp, "decode")
        if max(prefill_tp, decode_tp) % min(prefill_tp, decode_tp):
            raise TPMappingError("the larger TP size must be a multiple of the smaller")
    except TPMappingError as exc:
        raise TPMappingError(
            f"unsupported prefill/decode TP pairing: prefill tp_size={prefill_tp}, "
            f"decode tp_size={decode_tp} ({exc})"
        ) from None


def local_kv_heads(total_heads: int, tp_size: int) -> int:
    """KV heads each rank of a `tp_size` group holds."""
    return max(1, total_heads // tp_size)


def heads_of_rank(total_heads: int, tp_size: int, rank: int) -> range:
    """The global KV head ids rank `rank` of a `tp_size` group holds."""
    if total_heads >= tp_size:
        per_rank = total_heads // tp_size
        return range(rank * per_rank, (rank + 1) * per_rank)
    head = rank // (tp_size // total_heads)
    return range(head, head + 1)


def _source_of_head(head: int, total_heads: int, prefill_tp: int, decode_rank: int) -> int:
    if total_heads >= prefill_tp:
        return head // (total_heads // prefill_tp)
    replicas = prefill_tp // total_heads
    return head * replicas + decode_rank % replicas


def plan_decode_rank(
    prefill_tp: int, decode_tp: int, total_heads: int, decode_rank: int
) -> list[HeadSlice]:
    """The head slices decode rank `decode_rank` reads, ordered by `dst_head`.

    Raises:
        TPMappingError: unsupported pairing, or `decode_rank` out of range.
    """
    validate_pairing(prefill_tp, decode_tp, total_heads)
    if not 0 <= decode_rank < decode_tp:
        raise TPMappingError(f"decode rank {decode_rank} is outside tp_size={decode_tp}")
    slices: list[HeadSlice] = []
    for dst, head in enumerate(heads_of_rank(total_heads, decode_tp, decode_rank)):
        source = _source_of_head(head, total_heads, prefill_tp, decode_rank)
        src = head - heads_of_rank(total_heads, prefill_tp, source).start
        last = slices[-1] if slices else None
        if (
            last is not None
            and last.prefill_rank == source
            and last.src_head + last.num_heads == src
            and last.dst_head + last.num_heads == dst
        ):
            slices[-1] = HeadSlice(source, last.src_head, last.dst_head, last.num_heads + 1)
        else:
            slices.append(HeadSlice(source, src, dst, 1))
    return slices


def _notifications(prefill_tp: int, decode_tp: int, total_heads: int) -> list[set[int]]:
    # For every prefill rank, the decode ranks that notify it.
    senders: list[set[int]] = [set() for _ in range(prefill_tp)]
    for rank in range(decode_tp):
        for piece in plan_decode_rank(prefill_tp, decode_tp, total_heads, rank):
            senders[piece.prefill_rank].add(rank)
    for prefill_rank, ranks in enumerate(senders):
        if not ranks:
            ranks.add(prefill_rank % decode_tp)
    return senders


def notified_prefill_ranks(
    prefill_tp: int, decode_tp: int, total_heads: int, decode_rank: int
) -> list[int]:
    """Prefill ranks decode rank `decode_rank` sends `ReadDone` to, ascending.

    Those it reads from, plus the unread replicas assigned to it.
    """
    senders = _notifications(prefill_tp, decode_tp, total_heads)
    return [p for p, ranks in enumerate(senders) if decode_rank in ranks]


def expected_notifications(
    prefill_tp: int, decode_tp: int, total_heads: int, prefill_rank: int
) -> int:
    """How many decode ranks send `ReadDone` to prefill rank `prefill_rank`."""
    return len(_notifications(prefill_tp, decode_tp, total_heads)[prefill_rank])
