"""How a Mooncake P/D worker presents itself to its peers and keeps track of them.

`make_agent_metadata` builds the `AgentMetadata` a worker serves on its side channel (where
its KV cache lives); `PeerDirectory` caches one side-channel client and the handshaken
`AgentMetadata` per remote worker address.
"""

from __future__ import annotations

import threading
import uuid

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig
from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_layout import KVLayout
from vllm_ascend.distributed.kv_transfer.kv_p2p.messages import AgentMetadata, Handshake
from vllm_ascend.distributed.kv_transfer.kv_p2p.side_channel import (
    SideChannelClient,
    SideChannelError,
)

__all__ = ["PeerDirectory", "make_agent_metadata"]


def make_agent_metadata(
    config: MooncakeP2PConfig,
    tp_rank: int,
    layout: KVLayout,
    session_id: str,
    side_channel: str,
) -> AgentMetadata:
    """This worker's `AgentMetadata` (see `messages.AgentMetadata`)."""
    return AgentMetadata(
        engine_id=config.engine_id,
        agent_id=uuid.uuid4().hex,
        tp_rank=tp_rank,
        tp_size=config.tp_size,
        session_id=session_id,
        region_bases=list(layout.bases),
        block_strides=list(layout.block_strides),
        block_lens=list(layout.block_lens),
        num_blocks=layout.num_blocks,
        block_size=config.block_size,
        kv_heads=layout.kv_heads,
        head_major=layout.head_major,
        layer_of_region=list(layout.layer_of_region),
        side_channel=side_channel,
    )


class PeerDirectory:
    """Side-channel clients and handshaken `AgentMetadata` of remote workers, per address."""

    def __init__(self, engine_id: str, tp_rank: int, timeout_s: float) -> None:
        self._engine_id = engine_id
        self._tp_rank = tp_rank
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._clients: dict[str, SideChannelClient] = {}
        self._agents: dict[str, AgentMetadata] = {}

    def client(self, address: str) -> SideChannelClient:
        with self._lock:
            client = self._clients.get(address)
            if client is None:
                client = self._clients[address] = SideChannelClient(address, self._timeout_s)
            return client

    def agent(self, address: str, engine_id: str) -> AgentMetadata:
        """The `AgentMetadata` served at `address`, fetched once.

        Raises:
            SideChannelError: no or an invalid answer, or the worker there belongs to another
                engine than `engine_id` (not checked when `engine_id` is empty).
        """
        with self._lock:
            cached = self._agents.get(address)
        if cached is not None:
            return cached
        reply = self.client(address).call(Handshake(self._engine_id, self._tp_rank))
        if not isinstance(reply, AgentMetadata):
            raise SideChannelError(f"{address} answered a handshake with {type(reply).__name__}")
        if engine_id and reply.engine_id != engine_id:
            raise SideChannelError(
                f"{address} serves engine {reply.engine_id!r}, not {engine_id!r}"
            )
        with self._lock:
            self._agents[address] = reply
        return reply

    def forget(self, address: str) -> None:
        """Drop the cached metadata (the peer may have restarted)."""
        with self._lock:
            self._agents.pop(address, None)

    def close(self) -> None:
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
            self._agents.clear()
        for client in clients:
            client.close()
