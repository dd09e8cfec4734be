"""Transfer helpers shared by the site's prefill and decode launchers."""

import os

import vllm_ascend.distributed.mooncake_transfer_engine as transfer_engine
from vllm_ascend.distributed import communicator
from vllm_ascend.distributed.mooncake_connector import (
    KVCacheRecvingThread,  # receives blocks on the decode side
    MooncakeConnector,
)
from vllm_ascend.distributed.utils import align_memory, fc3_all_gather_and_maybe_unpad_impl

DEVICE_COMMUNICATOR = "vllm_ascend.distributed.communicator.NPUCommunicator"


def transfer_timeout_ms() -> int:
    # Mirrors vllm_ascend.distributed.utils.get_transfer_timeout_value().
    return int(os.getenv("ASCEND_TRANSFER_TIMEOUT", "30000"))


def make_receiver(*args, **kwargs) -> KVCacheRecvingThread:
    engine = transfer_engine.global_te.get_transfer_engine("127.0.0.1", device_name=None)
    return KVCacheRecvingThread(engine, *args, **kwargs)


def gather(hidden, pad):
    aligned = align_memory(hidden, 2 * 1024 * 1024)
    return fc3_all_gather_and_maybe_unpad_impl(aligned, pad)


def connector_class() -> type:
    return MooncakeConnector


def communicator_class() -> type:
    return communicator.NPUCommunicator
