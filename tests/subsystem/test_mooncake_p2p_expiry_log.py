"""A prefill whose decode instance went away logs its expired sends per fault, not per request.

When a decode instance dies (or never forwards the parameters), every request it had expires at
the prefill's `send_timeout_s`, a few per engine step. Found by `benchmarks/soak.py`: a decode
SIGKILL under load wrote one warning per request (466 lines for one fault). The worker now names
the first expiry at once and sums the rest into at most one line per `EXPIRY_LOG_INTERVAL_S`.
"""

from __future__ import annotations

import logging
import re
from types import SimpleNamespace

import pytest

pytest.importorskip("msgspec")
pytest.importorskip("zmq")

from vllm_ascend.distributed.kv_transfer.kv_p2p import send_tracker, worker_base  # noqa: E402
from vllm_ascend.distributed.kv_transfer.kv_p2p.send_tracker import SendTracker  # noqa: E402
from vllm_ascend.distributed.kv_transfer.kv_p2p.worker_base import P2PWorkerBase  # noqa: E402

MESSAGE = "prefill request %s: no decode instance read its KV blocks within %.0f s; freeing them"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(worker_base.time, "monotonic", fake)
    return fake


def expired_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "no decode instance read" in r.getMessage()]


def test_many_expiries_log_few_lines_and_free_every_request(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    config = SimpleNamespace(send_timeout_s=30.0)
    worker = SimpleNamespace(sends=SendTracker(orphan_ttl_s=60), config=config)
    for i in range(200):  # deadlines 10 ms apart: a few expire in each step below
        worker.sends.add(f"req-{i}", 30.0 + i * 0.01, clock.now)
    caplog.set_level(logging.WARNING)
    clock.now += 30.0
    freed: set[str] = set()
    for _ in range(50):  # 50 engine steps, 50 ms apart
        clock.now += 0.05
        freed |= P2PWorkerBase._pop_finished_sends(worker, MESSAGE)  # type: ignore[arg-type]
    assert freed == {f"req-{i}" for i in range(200)}
    lines = expired_lines(caplog)
    assert len(lines) == 1 and "req-0" in lines[0], lines
    # The rest is summed into one line once the interval passed (at the next step).
    clock.now += send_tracker.EXPIRY_LOG_INTERVAL_S
    P2PWorkerBase._pop_finished_sends(worker, MESSAGE)  # type: ignore[arg-type]
    lines = expired_lines(caplog)
    assert len(lines) == 2, lines
    # Every expiry is counted in exactly one line: "ID (and N more since the last such line)".
    counted = [1 + int(m.group(1)) if (m := re.search(r"and (\d+) more", x)) else 1 for x in lines]
    assert sum(counted) == 200, lines
    assert worker.sends.expired == 200
