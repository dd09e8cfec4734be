"""What the KV pool connectors' scheduler sides read from vLLM, the same way for each of them.

- `single_group_block_size`: the block size of a KV cache these connectors support (one KV
  cache group whose hash blocks are its blocks);
- `bytes_per_block`: one block's size on one worker, over all its KV cache tensors;
- `scheduled_requests`: each tracked request of a step with its KV cache block ids brought up
  to date, and how many of its tokens are computed once the step ran;
- `track_allocated`: the start of `update_state_after_alloc`, the request's state and the
  lookup its `get_num_new_matched_tokens` left.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

__all__ = [
    "TrackedRequest",
    "bytes_per_block",
    "scheduled_requests",
    "single_group_block_size",
    "track_allocated",
]


def single_group_block_size(kv_cache_config: KVCacheConfig, connector: str) -> int:
    """The block size (tokens) of a KV cache with one group whose hash blocks equal its blocks.

    Args:
        kv_cache_config: the engine's KV cache layout.
        connector: the connector's name, for the error message.

    Raises:
        ValueError: several KV cache groups, or hash blocks of another size.
    """
    groups = kv_cache_config.kv_cache_groups
    if len(groups) != 1:
        raise ValueError(f"{connector} supports one KV cache group, the model has {len(groups)}")
    block_size = int(groups[0].kv_cache_spec.block_size)
    hash_block_size = getattr(kv_cache_config, "hash_block_size", None) or block_size
    if hash_block_size != block_size:
        raise ValueError(
            f"{connector} needs hash blocks ({hash_block_size} tokens) equal to KV cache blocks "
            f"({block_size} tokens)"
        )
    return block_size


def bytes_per_block(kv_cache_config: KVCacheConfig) -> int:
    """Bytes one KV cache block takes on one worker, over all its KV cache tensors.

    Raises:
        ValueError: the KV cache has no blocks.
    """
    if kv_cache_config.num_blocks <= 0:
        raise ValueError("the KV cache has no blocks")
    return sum(t.size for t in kv_cache_config.kv_cache_tensors) // kv_cache_config.num_blocks


class TrackedRequest(Protocol):
    """A scheduler side's state of one request: its KV cache block ids of group 0."""

    block_ids: list[int]


StateT = TypeVar("StateT", bound=TrackedRequest)
LookupT = TypeVar("LookupT")


def track_allocated(
    request: Request,
    states: MutableMapping[str, StateT],
    new_state: Callable[[Request], StateT],
    lookups: MutableMapping[str, LookupT],
) -> tuple[StateT, LookupT] | tuple[StateT, None]:
    """`(state, lookup)` of a request vLLM just allocated blocks for.

    The state is the one in `states`, or `new_state(request)` stored there on first sight
    (from here on the request's blocks are tracked); the lookup is what
    `get_num_new_matched_tokens` left in `lookups` for it, removed there (None: no lookup, or
    one that found nothing).
    """
    req_id = request.request_id
    state = states.get(req_id)
    if state is None:
        state = states[req_id] = new_state(request)
    # Two tuple types, not one with an optional member: mypy then infers LookupT from
    # `lookups` alone where the caller unpacks the result.
    found = lookups.pop(req_id, None)
    return (state, None) if found is None else (state, found)


def scheduled_requests(
    scheduler_output: SchedulerOutput, states: Mapping[str, StateT]
) -> Iterator[tuple[StateT, int]]:
    """Yield `(state, computed_tokens)` for each request of the step found in `states`.

    New requests come first, then the already-scheduled ones, as vLLM lists them. Before a
    state is yielded its `block_ids` are updated: replaced for a new or resumed request (a
    resumed one got all its blocks anew), extended by the step's new blocks otherwise.
    `computed_tokens` counts the request's tokens whose KV exists after this step's forward.
    """
    num_scheduled = scheduler_output.num_scheduled_tokens
    for new in scheduler_output.scheduled_new_reqs:
        state = states.get(new.req_id)
        if state is None:
            continue
        state.block_ids = list(new.block_ids[0])
        yield state, new.num_computed_tokens + num_scheduled.get(new.req_id, 0)
    cached = scheduler_output.scheduled_cached_reqs
    for i, req_id in enumerate(cached.req_ids):
        state = states.get(req_id)
        if state is None:
            continue
        new_ids = cached.new_block_ids[i]
        if req_id in cached.resumed_req_ids:
            state.block_ids = list(new_ids[0]) if new_ids is not None else []
        elif new_ids is not None:
            state.block_ids.extend(new_ids[0])
        yield state, cached.num_computed_tokens[i] + num_scheduled.get(req_id, 0)
