"""Messages of the P/D side channel (ZMQ), as msgspec structs: msgpack on the wire, never pickle.

Every message is a tagged struct, so one decoder accepts exactly this set and rejects anything
else (`msgspec.ValidationError`/`DecodeError`), which the server logs and drops.

Request -> reply pairs:
- `Handshake` -> `AgentMetadata`: where a worker's KV cache lives (Mooncake session id, base
  address and block geometry of every region), so a peer can address its blocks directly.
- `ReadDone` -> `Ack`: a decode worker finished reading (or gave up on) a request's blocks;
  the prefill worker may free them once every expected reader said so.
- `PushRequest` -> `Ack` (layerwise): a decode worker tells a prefill worker where to write a
  request's KV (its agent metadata and block ids).
- `LayerDone` -> `Ack` (layerwise): a prefill worker wrote one layer (or all, `layer=-1`) of a
  request into the decode worker's blocks.
- `Withheld` -> `Ack` (layerwise): a prefill worker will not push `transfer_id` (its request
  was dropped or aborted); also the reply to a `PushRequest` for such a transfer. The decode
  worker gives the load up at once instead of waiting for `layer_wait_timeout_s`.
- anything a server refuses -> `Rejected(reason)`.
"""

from __future__ import annotations

import msgspec

__all__ = [
    "Ack",
    "AgentMetadata",
    "Handshake",
    "LayerDone",
    "Message",
    "PushRequest",
    "ReadDone",
    "Rejected",
    "Withheld",
    "decode_message",
    "encode_message",
]


class AgentMetadata(msgspec.Struct, tag=True, frozen=True):
    """A worker's KV cache as its peers address it.

    Attributes:
        engine_id: the vLLM engine (`KVTransferConfig.engine_id`).
        agent_id: unique per worker process start (a restarted worker gets a new one).
        tp_rank: this worker's tensor-parallel rank; `tp_size` its group size.
        session_id: the Mooncake transfer engine's session name (`"host:port"`).
        region_bases: start address of every KV region (one per layer, or per layer and
            K/V), in the same order on every worker of a model.
        block_strides: bytes from one block to the next, per region.
        block_lens: bytes of one block's data, per region (== stride when packed).
        num_blocks: KV cache blocks per region.
        block_size: tokens per block.
        kv_heads: KV heads stored in each block on this worker.
        head_major: whether a block stores its heads one after the other, so a head range
            is one contiguous byte range (needed when the two sides' TP sizes differ).
        layer_of_region: the model layer index of every region.
        side_channel: `"tcp://host:port"` this worker serves, `""` when it serves none.
    """

    engine_id: str
    agent_id: str
    tp_rank: int
    tp_size: int
    session_id: str
    region_bases: list[int]
    block_strides: list[int]
    block_lens: list[int]
    num_blocks: int
    block_size: int
    kv_heads: int
    head_major: bool
    layer_of_region: list[int]
    side_channel: str = ""


class Handshake(msgspec.Struct, tag=True, frozen=True):
    """Ask a worker for its `AgentMetadata`; `engine_id`/`tp_rank` name the asker (for logs)."""

    engine_id: str
    tp_rank: int


class ReadDone(msgspec.Struct, tag=True, frozen=True):
    """A reader is done with `request_id`'s blocks on the receiving worker.

    Attributes:
        request_id: the request id on the prefill instance (`remote_request_id`).
        reader: `"<engine_id>:<tp_rank>"` of the decode worker.
        expected: how many distinct readers the receiving worker must hear from before it
            frees the blocks (depends on both TP sizes; the readers all compute the same).
        ok: whether the read succeeded (for logs and counters; blocks are freed either way).
    """

    request_id: str
    reader: str
    expected: int
    ok: bool = True


class PushRequest(msgspec.Struct, tag=True, frozen=True):
    """Layerwise: where the prefill worker must write a request's KV.

    Attributes:
        transfer_id: shared by the prefill and the decode request (set by the proxy).
        reader: `"<engine_id>:<tp_rank>"` of the decode worker.
        agent: the decode worker's KV cache.
        block_ids: decode block ids for token blocks `first_block, first_block + 1, ...`.
        first_block: index of the first token block to write (earlier ones are cached).
        head_slices: `[src_head, dst_head, num_heads]` triples this reader takes from the
            receiving prefill worker.
        expected: how many readers the receiving prefill worker must hear from.
    """

    transfer_id: str
    reader: str
    agent: AgentMetadata
    block_ids: list[int]
    first_block: int
    head_slices: list[tuple[int, int, int]]
    expected: int


class LayerDone(msgspec.Struct, tag=True, frozen=True):
    """Layerwise: `layer` of `transfer_id` was written (`layer=-1`: the request is complete)."""

    transfer_id: str
    sender_rank: int
    layer: int
    ok: bool = True


class Withheld(msgspec.Struct, tag=True, frozen=True):
    """Layerwise: the prefill worker `sender_rank` will not push `transfer_id`; `reason` says
    why (for the decode side's log line)."""

    transfer_id: str
    sender_rank: int
    reason: str


class Ack(msgspec.Struct, tag=True, frozen=True):
    """Generic positive reply."""


class Rejected(msgspec.Struct, tag=True, frozen=True):
    """The server understood the message but refused it."""

    reason: str


Message = AgentMetadata | Handshake | ReadDone | PushRequest | LayerDone | Withheld | Ack | Rejected

_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[Message] = msgspec.msgpack.Decoder(Message)


def encode_message(message: Message) -> bytes:
    """msgpack bytes of `message`."""
    return _encoder.encode(message)


def decode_message(data: bytes) -> Message:
    """The message in `data`.

    Raises:
        msgspec.DecodeError: not msgpack, or not one of this module's messages (a
            `msgspec.ValidationError` is a `DecodeError`).
    """
    return _decoder.decode(data)
