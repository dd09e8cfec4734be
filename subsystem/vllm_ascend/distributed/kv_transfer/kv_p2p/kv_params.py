"""The `kv_transfer_params` both instances exchange through the proxy, parsed (no vLLM import).

`kv_transfer_params` (a dict in the request's `SamplingParams.extra_args` and in the
`RequestOutput`), following vLLM's disaggregated-prefill protocol:

- to the prefill instance: `{"do_remote_decode": true}` (plus `transfer_id` for the
  layerwise connector);
- returned by the prefill instance (`request_finished`), forwarded to the decode instance:
  `do_remote_prefill=True`, `do_remote_decode=False`, `remote_engine_id`,
  `remote_request_id`, `remote_host`, `remote_port` (side-channel port of prefill TP rank 0),
  `remote_block_ids` (prefill block ids, in token order), `tp_size` (prefill TP size).

Layerwise connector (both requests sent at once, the proxy knows the prefill side channel):
- to the prefill instance: `{"do_remote_decode": true, "transfer_id": T}`;
- to the decode instance: `{"do_remote_prefill": true, "transfer_id": T, "remote_host",
  "remote_port", "tp_size"}` (`remote_engine_id` optional: checked when given).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RecvRequest",
    "flag",
    "RemotePrefill",
    "parse_layerwise_prefill",
    "parse_remote_prefill",
    "transfer_id_of",
]


@dataclass(frozen=True)
class RemotePrefill:
    """Where a decode request's prompt KV lives on the prefill instance."""

    engine_id: str
    request_id: str
    host: str
    port: int
    block_ids: list[int]
    tp_size: int


_REQUIRED = (
    "remote_engine_id",
    "remote_request_id",
    "remote_host",
    "remote_port",
    "remote_block_ids",
)


def flag(params: Mapping[str, Any], key: str) -> bool:
    """`params[key]` as a flag (`do_remote_decode`, `do_remote_prefill`): absent or None is
    false.

    Raises:
        ValueError: present with another type than bool (a JSON string `"false"` would
            otherwise count as true); the message names the field.
    """
    value = params.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValueError(f"kv_transfer_params[{key!r}] must be true or false, got {value!r}")
    return value


def _port_and_tp_size(params: Mapping[str, Any]) -> tuple[int, int]:
    # `tp_size` defaults to 1; `remote_tp_size` is accepted as its alias.
    try:
        port = int(params["remote_port"])
        tp_size = int(params.get("tp_size", params.get("remote_tp_size", 1)))
    except (TypeError, ValueError):
        raise ValueError("remote_port and tp_size must be integers") from None
    return port, tp_size


def parse_remote_prefill(params: Mapping[str, Any]) -> RemotePrefill:
    """The prefill location in a decode request's `kv_transfer_params`.

    `tp_size` defaults to 1; `remote_tp_size` is accepted as its alias.

    Raises:
        ValueError: a key is missing or has the wrong type (the message names it).
    """
    missing = [key for key in _REQUIRED if params.get(key) is None]
    if missing:
        raise ValueError(f"kv_transfer_params lacks {missing}")
    block_ids = params["remote_block_ids"]
    # vLLM's HMA-aware producers send one list per KV cache group; we have one group.
    if block_ids and isinstance(block_ids[0], list):
        if len(block_ids) != 1:
            raise ValueError("remote_block_ids has several KV cache groups; one is supported")
        block_ids = block_ids[0]
    if not all(isinstance(b, int) and not isinstance(b, bool) for b in block_ids):
        raise ValueError("remote_block_ids must be a list of integers")
    port, tp_size = _port_and_tp_size(params)
    return RemotePrefill(
        engine_id=str(params["remote_engine_id"]),
        request_id=str(params["remote_request_id"]),
        host=str(params["remote_host"]),
        port=port,
        block_ids=list(block_ids),
        tp_size=tp_size,
    )


def transfer_id_of(params: Mapping[str, Any]) -> str:
    """The `transfer_id` a layerwise request carries.

    Raises:
        ValueError: missing or not a non-empty string.
    """
    value = params.get("transfer_id")
    if not isinstance(value, str) or not value:
        raise ValueError(f"kv_transfer_params needs a non-empty string transfer_id, got {value!r}")
    return value


def parse_layerwise_prefill(params: Mapping[str, Any]) -> RemotePrefill:
    """The prefill side channel a layerwise decode request registers with.

    `request_id` of the result is the `transfer_id`; `block_ids` is empty (the prefill side
    pushes); `engine_id` is `""` when the parameters do not name one.

    Raises:
        ValueError: a key is missing or has the wrong type (the message names it).
    """
    transfer_id = transfer_id_of(params)
    missing = [key for key in ("remote_host", "remote_port") if params.get(key) is None]
    if missing:
        raise ValueError(f"kv_transfer_params lacks {missing}")
    port, tp_size = _port_and_tp_size(params)
    return RemotePrefill(
        engine_id=str(params.get("remote_engine_id") or ""),
        request_id=transfer_id,
        host=str(params["remote_host"]),
        port=port,
        block_ids=[],
        tp_size=tp_size,
    )


@dataclass(frozen=True)
class RecvRequest:
    """A decode request whose prompt KV the worker must read.

    Attributes:
        request_id: the decode instance's request id.
        local_block_ids: blocks to fill, in token order; empty means "read nothing, only
            tell the prefill instance to free its blocks" (request aborted before admission).
        remote: the prefill location.
    """

    request_id: str
    local_block_ids: list[int]
    remote: RemotePrefill
