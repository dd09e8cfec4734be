"""`kv_transfer_params` of the wrong type at the Mooncake P/D schedulers (issue "Hardening",
item 18): a flag must be a bool. `do_remote_decode: "false"` (a JSON string) used to count as
true; now it is logged once, naming the field, and the request runs as a local one.

Real vLLM `Request`s and the real scheduler sides; no engine is needed for these decisions.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

pytest.importorskip("vllm")

from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.v1.core.sched.output import SchedulerOutput  # noqa: E402
from vllm.v1.request import Request, RequestStatus  # noqa: E402

from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig  # noqa: E402
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_scheduler import (  # noqa: E402
    MooncakeLayerwiseScheduler,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.pull_scheduler import (  # noqa: E402
    MooncakeConnectorScheduler,
)


def config(kv_role: str) -> MooncakeP2PConfig:
    return MooncakeP2PConfig.from_extra_config(
        {},
        engine_id="engine",
        kv_role=kv_role,
        kv_port=20001,
        tp_size=1,
        dp_rank=0,
        total_kv_heads=2,
        block_size=16,
        default_transfer_timeout_s=10.0,
    )


def request(params: dict[str, Any], request_id: str = "r-1") -> Request:
    sampling = SamplingParams(max_tokens=1, extra_args={"kv_transfer_params": params})
    return Request(request_id, list(range(40)), sampling, None)


@pytest.fixture
def warnings(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    # vllm_ascend's logger does not propagate to the root logger by default.
    logger = logging.getLogger("vllm_ascend")
    propagate, logger.propagate = logger.propagate, True
    caplog.set_level(logging.WARNING)
    yield caplog
    logger.propagate = propagate


def field_lines(caplog: pytest.LogCaptureFixture, field: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if field in r.getMessage()]


def test_a_string_do_remote_decode_does_not_hold_the_blocks(
    warnings: pytest.LogCaptureFixture,
) -> None:
    scheduler = MooncakeConnectorScheduler(config("kv_producer"))
    req = request({"do_remote_decode": "false"})
    req.status = RequestStatus.FINISHED_LENGTH_CAPPED
    assert scheduler.request_finished(req, [1, 2, 3]) == (False, None)
    assert scheduler.stats()["held_requests"] == 0
    assert scheduler.request_finished(req, [1, 2, 3]) == (False, None)
    lines = field_lines(warnings, "do_remote_decode")
    assert len(lines) == 1 and "'false'" in lines[0], lines
    assert scheduler.stats()["invalid_params"] == 1


def test_a_numeric_do_remote_prefill_is_a_local_request(
    warnings: pytest.LogCaptureFixture,
) -> None:
    scheduler = MooncakeConnectorScheduler(config("kv_consumer"))
    params = {
        "do_remote_prefill": 1,
        "remote_engine_id": "p",
        "remote_request_id": "p-1",
        "remote_host": "127.0.0.1",
        "remote_port": 20001,
        "remote_block_ids": [1, 2, 3],
    }
    req = request(params)
    assert scheduler.get_num_new_matched_tokens(req, 0) == (0, False)
    assert scheduler.get_num_new_matched_tokens(req, 0) == (0, False)
    assert len(field_lines(warnings, "do_remote_prefill")) == 1


def test_a_layerwise_prefill_with_a_string_flag_withholds_its_transfer(
    warnings: pytest.LogCaptureFixture,
) -> None:
    # The decode side of that transfer is told at once rather than waiting for the push.
    scheduler = MooncakeLayerwiseScheduler(config("kv_producer"))
    req = request({"do_remote_decode": "true", "transfer_id": "t-1"})
    scheduler.update_state_after_alloc(req, None, 0)  # type: ignore[arg-type]
    assert len(field_lines(warnings, "do_remote_decode")) == 1
    assert scheduler._pushing == {}
    output = SchedulerOutput.make_empty()
    meta = scheduler.build_connector_meta(output)
    assert list(meta.withheld) == ["t-1"]
    assert meta.saves == []
