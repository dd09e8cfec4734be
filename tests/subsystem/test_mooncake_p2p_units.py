"""Pure parts of the Mooncake P/D connectors: TP mapping (S17), config, transfer lists,
messages, kv_transfer_params, and the ZMQ side channel on loopback."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from typing import Any

import pytest

pytest.importorskip("msgspec")
zmq = pytest.importorskip("zmq")

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig  # noqa: E402
from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_params import (  # noqa: E402
    parse_remote_prefill,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.messages import (  # noqa: E402
    Ack,
    AgentMetadata,
    Handshake,
    Message,
    ReadDone,
    Rejected,
    decode_message,
    encode_message,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.side_channel import (  # noqa: E402
    SideChannelClient,
    SideChannelError,
    SideChannelRejected,
    SideChannelServer,
    SideChannelTimeout,
    zmq_address,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.tp_mapping import (  # noqa: E402
    TPMappingError,
    expected_notifications,
    heads_of_rank,
    local_kv_heads,
    notified_prefill_ranks,
    plan_decode_rank,
    validate_pairing,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.transfer_plan import (  # noqa: E402
    block_runs,
    plan_transfer,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- S17: heterogeneous TP mapping ------------------------------------------------------------

PAIRS = [(8, 1), (4, 2), (2, 4), (1, 2), (2, 2)]
HEAD_COUNTS = [1, 2, 8, 16]


def supported(prefill_tp: int, decode_tp: int, heads: int) -> bool:
    try:
        validate_pairing(prefill_tp, decode_tp, heads)
    except TPMappingError:
        return False
    return True


@pytest.mark.parametrize(("prefill_tp", "decode_tp"), PAIRS)
@pytest.mark.parametrize("heads", HEAD_COUNTS)
def test_every_decode_head_is_sourced_exactly_once(
    prefill_tp: int, decode_tp: int, heads: int
) -> None:
    assert supported(prefill_tp, decode_tp, heads)
    for rank in range(decode_tp):
        plan = plan_decode_rank(prefill_tp, decode_tp, heads, rank)
        assert plan == plan_decode_rank(prefill_tp, decode_tp, heads, rank)  # deterministic
        want = list(heads_of_rank(heads, decode_tp, rank))
        got: list[int] = []
        for piece in plan:
            # The source rank really holds those heads, at those offsets.
            source_heads = list(heads_of_rank(heads, prefill_tp, piece.prefill_rank))
            taken = source_heads[piece.src_head : piece.src_head + piece.num_heads]
            assert len(taken) == piece.num_heads
            assert taken == want[piece.dst_head : piece.dst_head + piece.num_heads]
            got.extend(taken)
        assert sorted(got) == want  # every local head once, none twice
        assert [p.dst_head for p in plan] == sorted(p.dst_head for p in plan)


@pytest.mark.parametrize(("prefill_tp", "decode_tp"), PAIRS)
@pytest.mark.parametrize("heads", HEAD_COUNTS)
def test_every_prefill_rank_is_released_by_the_expected_readers(
    prefill_tp: int, decode_tp: int, heads: int
) -> None:
    # Both roles compute the same answer: the decode ranks that notify each prefill rank, and
    # how many notifications that prefill rank waits for.
    senders: dict[int, set[int]] = {p: set() for p in range(prefill_tp)}
    for rank in range(decode_tp):
        notified = notified_prefill_ranks(prefill_tp, decode_tp, heads, rank)
        read_from = {
            piece.prefill_rank for piece in plan_decode_rank(prefill_tp, decode_tp, heads, rank)
        }
        assert read_from <= set(notified)
        for p in notified:
            senders[p].add(rank)
    for p in range(prefill_tp):
        assert senders[p], f"prefill rank {p} would hold its blocks until the timeout"
        assert expected_notifications(prefill_tp, decode_tp, heads, p) == len(senders[p])


def test_replicated_heads_spread_reads_over_replicas() -> None:
    # 8 prefill ranks, 1 KV head (MLA-like), 2 decode ranks: each decode rank picks a replica.
    sources = {plan_decode_rank(8, 2, 1, r)[0].prefill_rank for r in range(2)}
    assert sources == {0, 1}
    assert local_kv_heads(1, 8) == 1


@pytest.mark.parametrize(
    ("prefill_tp", "decode_tp", "heads"),
    [(3, 2, 6), (2, 3, 6), (4, 1, 6), (1, 4, 6), (0, 1, 2), (2, 2, 3)],
)
def test_unsupported_pairing_names_both_sizes(prefill_tp: int, decode_tp: int, heads: int) -> None:
    with pytest.raises(TPMappingError) as info:
        validate_pairing(prefill_tp, decode_tp, heads)
    message = str(info.value)
    assert "\n" not in message
    assert f"prefill tp_size={prefill_tp}" in message and f"decode tp_size={decode_tp}" in message


def test_all_pairs_up_to_eight_either_validate_or_raise() -> None:
    for p, d, h in itertools.product(range(1, 9), range(1, 9), (1, 2, 4, 8)):
        if supported(p, d, h):
            for rank in range(d):
                assert plan_decode_rank(p, d, h, rank)


# ---- config -----------------------------------------------------------------------------------


def config(extra: dict[str, Any] | None = None, **kwargs: Any) -> MooncakeP2PConfig:
    args: dict[str, Any] = {
        "engine_id": "e",
        "kv_role": "kv_consumer",
        "kv_port": 20000,
        "tp_size": 1,
        "dp_rank": 0,
        "total_kv_heads": 8,
        "block_size": 32,
        "default_transfer_timeout_s": 33.0,
    }
    args.update(kwargs)
    return MooncakeP2PConfig.from_extra_config(extra, **args)


def test_config_defaults_and_ports() -> None:
    c = config(tp_size=2, dp_rank=3)
    assert c.side_channel_host == "127.0.0.1" and c.engine_hostname == "127.0.0.1"
    assert c.side_channel_port == 20000 + 3 * 2 and c.worker_port(1) == 20007
    assert c.transfer_timeout_s == 33.0 and c.layer_wait_timeout_s == 33.0
    assert c.protocol == "tcp" and c.metadata_server == "P2PHANDSHAKE"
    assert c.prefill.tp_size == 2 and c.decode.tp_size == 2
    assert c.is_consumer and not c.is_producer


def test_config_accepts_what_deployments_write() -> None:
    c = config(
        {
            "prefill": {"dp_size": 2, "tp_size": "4"},
            "decode": {"dp_size": 1, "tp_size": 2},
            "use_ascend_direct": True,
            "handshake_timeout_s": 5,
        },
        tp_size=2,
    )
    assert (c.prefill.tp_size, c.prefill.dp_size, c.decode.tp_size) == (4, 2, 2)
    assert c.handshake_timeout_s == 5.0


@pytest.mark.parametrize(
    ("extra", "kwargs", "message"),
    [
        (
            {"handshake_timeout": 5},
            {},
            "unknown Mooncake P/D kv_connector_extra_config key(s) ['handshake_timeout']",
        ),
        ({"send_timeout_s": -1}, {}, "'send_timeout_s'] must be positive"),
        ({"num_transfer_threads": True}, {}, "'num_transfer_threads'] must be an integer"),
        ({"prefill": {"tp": 2}}, {}, "unknown key(s) ['tp']"),
        ({"decode": {"tp_size": 2}}, {}, "this decode instance runs tensor_parallel_size=1"),
        ({"prefill": {"tp_size": 3}}, {}, "prefill tp_size=3, decode tp_size=1"),
        ({}, {"kv_role": "kv_sender"}, "kv_role must be"),
    ],
)
def test_config_rejects_mistakes(
    extra: dict[str, Any], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as info:
        config(extra, **kwargs)
    assert message in str(info.value)


# ---- kv_transfer_params -----------------------------------------------------------------------


def test_parse_remote_prefill() -> None:
    params = {
        "do_remote_prefill": True,
        "remote_engine_id": "p",
        "remote_request_id": "r",
        "remote_host": "10.0.0.1",
        "remote_port": "7000",
        "remote_block_ids": [[3, 4]],
        "remote_tp_size": 2,
    }
    remote = parse_remote_prefill(params)
    assert (remote.port, remote.block_ids, remote.tp_size) == (7000, [3, 4], 2)
    with pytest.raises(ValueError, match="remote_host"):
        parse_remote_prefill({k: v for k, v in params.items() if k != "remote_host"})
    with pytest.raises(ValueError, match="integers"):
        parse_remote_prefill({**params, "remote_block_ids": ["a"]})


# ---- transfer lists ---------------------------------------------------------------------------


def agent(
    bases: list[int], heads: int, block_len: int, stride: int | None = None, **kw: Any
) -> AgentMetadata:
    return AgentMetadata(
        engine_id="e",
        agent_id="a",
        tp_rank=0,
        tp_size=1,
        session_id="s",
        region_bases=bases,
        block_strides=[stride or block_len] * len(bases),
        block_lens=[block_len] * len(bases),
        num_blocks=100,
        block_size=32,
        kv_heads=heads,
        head_major=kw.get("head_major", True),
        layer_of_region=list(range(len(bases))),
    )


def test_whole_blocks_coalesce_into_runs() -> None:
    from vllm_ascend.distributed.kv_transfer.kv_p2p.tp_mapping import HeadSlice

    here, there = agent([0, 1_000_000], 2, 100), agent([5_000_000, 6_000_000], 2, 100)
    full = [HeadSlice(0, 0, 0, 2)]
    assert block_runs([1, 2, 3, 7], [10, 11, 13, 14]) == [(1, 10, 2), (3, 13, 1), (7, 14, 1)]
    local, remote, lengths = plan_transfer(here, there, [1, 2, 3, 7], [10, 11, 13, 14], full)
    assert local == [100, 300, 700, 1_000_100, 1_000_300, 1_000_700]
    assert remote == [5_001_000, 5_001_300, 5_001_400, 6_001_000, 6_001_300, 6_001_400]
    assert lengths == [200, 100, 100, 200, 100, 100]
    assert sum(lengths) == 2 * 4 * 100


def test_head_slices_address_the_right_heads() -> None:
    from vllm_ascend.distributed.kv_transfer.kv_p2p.tp_mapping import HeadSlice

    # Decode rank holds 4 heads (block 400 B), prefill rank 2 heads (block 200 B).
    here, there = agent([0], 4, 400), agent([10_000], 2, 200)
    local, remote, lengths = plan_transfer(here, there, [1, 2], [3, 4], [HeadSlice(1, 0, 2, 2)])
    assert local == [400 + 200, 800 + 200] and remote == [10_600, 10_800] and lengths == [200, 200]
    with pytest.raises(ValueError, match="head-major"):
        plan_transfer(
            agent([0], 4, 400, head_major=False), there, [1], [3], [HeadSlice(1, 0, 2, 2)]
        )
    with pytest.raises(ValueError, match="out of range"):
        plan_transfer(here, there, [100], [3], [HeadSlice(1, 0, 2, 2)])
    with pytest.raises(ValueError, match="regions"):
        plan_transfer(agent([0, 1], 4, 400), there, [1], [3], [HeadSlice(1, 0, 2, 2)])


# ---- messages and side channel ---------------------------------------------------------------


def test_messages_round_trip_and_reject_foreign_payloads() -> None:
    import msgspec

    for message in (Handshake("e", 1), ReadDone("r", "e:0", 2, ok=False), Ack()):
        assert decode_message(encode_message(message)) == message
    for junk in (
        b"",
        b"\xc1",
        msgspec.msgpack.encode({"type": "Pickle", "x": 1}),
        msgspec.msgpack.encode([1, 2]),
    ):
        with pytest.raises(msgspec.DecodeError):
            decode_message(junk)


@pytest.fixture
def echo_server() -> Any:
    seen: list[Message] = []

    def handler(message: Message) -> Message | None:
        seen.append(message)
        if isinstance(message, Handshake) and message.tp_rank < 0:
            raise RuntimeError("boom")
        if isinstance(message, ReadDone):
            return None  # no reply
        return Ack()

    server = SideChannelServer("127.0.0.1", free_port(), handler, name="test-side-channel").start()
    yield server, seen
    server.stop()


def test_side_channel_calls_errors_and_timeouts(echo_server: Any) -> None:
    server, seen = echo_server
    client = SideChannelClient(server.address, timeout_s=5.0)
    assert client.call(Handshake("e", 0)) == Ack()
    with pytest.raises(SideChannelRejected, match="RuntimeError: boom"):
        client.call(Handshake("e", -1))
    started = time.monotonic()
    with pytest.raises(SideChannelTimeout):
        client.call(ReadDone("r", "e:0", 1), timeout_s=0.3)
    assert time.monotonic() - started < 3
    # After a timeout the socket is replaced: the next call gets its own answer.
    assert client.call(Handshake("e", 2)) == Ack()
    assert server.served == 4
    client.close()


def test_side_channel_survives_garbage_from_many_peers(echo_server: Any) -> None:
    server, _ = echo_server
    ctx = zmq.Context()
    try:

        def spam() -> None:
            for kind in (zmq.DEALER, zmq.REQ):
                sock = ctx.socket(kind)
                # Linger so that the frame leaves before the socket closes.
                sock.setsockopt(zmq.LINGER, 5000)
                sock.connect(server.address)
                sock.send(b"\x00garbage")
                sock.close()

        threads = [threading.Thread(target=spam) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        deadline = time.monotonic() + 10
        while server.dropped < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.dropped == 8
        # A REQ peer (empty delimiter frame) gets its answer through the echoed envelope.
        req = ctx.socket(zmq.REQ)
        req.setsockopt(zmq.LINGER, 0)
        req.connect(server.address)
        req.send(encode_message(Handshake("e", 3)))
        assert req.poll(5000)
        assert decode_message(req.recv()) == Ack()
        req.close(0)
    finally:
        ctx.term()


def test_binding_a_taken_port_is_one_clear_error(echo_server: Any) -> None:
    server, _ = echo_server
    port = int(server.address.rsplit(":", 1)[1])
    with pytest.raises(
        SideChannelError, match=r"cannot bind the side channel to tcp://127\.0\.0\.1"
    ):
        SideChannelServer("127.0.0.1", port, lambda m: None).start()
    assert zmq_address("::1", 5) == "tcp://[::1]:5"


def test_side_channel_drops_an_oversized_frame_and_keeps_serving() -> None:
    # Each Handshake is answered with the size of its engine id, so a reply says which message
    # it answers.
    def handler(message: Message) -> Message | None:
        assert isinstance(message, Handshake)
        return Rejected(reason=str(len(message.engine_id)))

    server = SideChannelServer("127.0.0.1", free_port(), handler, max_message_bytes=1 << 20)
    server.start()
    ctx = zmq.Context()
    try:
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(server.address)
        sock.send(encode_message(Handshake("x" * (2 << 20), 0)))
        # ZMQ drops the sender's connection and the socket reconnects: retry until answered.
        for _ in range(50):
            sock.send(encode_message(Handshake("small", 1)))
            if sock.poll(1000):
                break
        reply = decode_message(sock.recv())
        assert reply == Rejected(reason="5"), "the oversized frame reached the handler"
        # Another peer is served as usual.
        client = SideChannelClient(server.address, timeout_s=10.0)
        with pytest.raises(SideChannelRejected, match="7"):
            client.call(Handshake("another", 2))
        client.close()
        sock.close(0)
    finally:
        server.stop()
        ctx.term()
