from unittest import mock

from ascend_plugin import transfer


@mock.patch("vllm_ascend.distributed.mooncake_transfer_engine.global_te")
def test_receiver_uses_the_global_engine(global_te):
    transfer.make_receiver()
    global_te.get_transfer_engine.assert_called_once()


def test_connector_class_is_patchable():
    with mock.patch("vllm_ascend.distributed.mooncake_connector.MooncakeConnector") as fake:
        assert transfer.connector_class() is not fake  # bound at import time


@mock.patch("vllm_ascend.distributed.utils.align_memory", side_effect=lambda t, a: t)
def test_gather_aligns(align):
    with mock.patch("vllm_ascend.distributed.utils.fc3_all_gather_and_maybe_unpad_impl"):
        transfer.gather([1, 2], 0)
