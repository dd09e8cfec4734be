"""The soak's verdict on made-up runs: each invariant of `benchmarks/soaklib/report.py` trips on
the records, samples and metrics that break it, and only on those (no engine started)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from harness import REPO_ROOT

pytest.importorskip("aiohttp")
pytest.importorskip("vllm.benchmarks.lib.endpoint_request_func")
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

from soaklib.faults import Fault  # noqa: E402
from soaklib.load import Record  # noqa: E402
from soaklib.logs import log_lines_since, log_offsets  # noqa: E402
from soaklib.monitor import parse_metrics  # noqa: E402
from soaklib.report import summarise  # noqa: E402

IDLE = {"usage": 0.0, "blocks": 64.0}


def record(target: str, end: float, *, ok: bool = True, **kw: object) -> Record:
    fields = {"hung": False, "wrong": False, "ttft": 0.1, "max_gap": 0.05, "error": ""}
    fields.update(kw)
    return Record(target, 0, end - 1, end, ok, **fields)  # type: ignore[arg-type]


def samples(rss: list[int], hits: list[float]) -> list[dict[str, object]]:
    return [
        {
            "t": 10.0 * i,
            "engines": {"pool": {"usage": 0.0, "hits": h, "queries": 100.0 * (i + 1)}},
            "rss_kb": {"pool#1": kb},
        }
        for i, (kb, h) in enumerate(zip(rss, hits, strict=True))
    ]


def test_a_clean_run_holds_every_invariant_and_times_its_recovery() -> None:
    fault = Fault("master_kill", "pool", "10.0.0.1:50051", start=20.0, end=25.0, ready=26.0)
    fault.window_end = 40.0
    records = [record("pool", t) for t in (5, 15, 27.5, 60, 90)]
    run = samples([100_000] * 10, [0, 10, 20, 20, 40, 50, 60, 70, 80, 90])
    summary = summarise(records, run, [fault], {"pool": IDLE}, end=100.0, still_open=0)
    assert (summary["requests_ok"], summary["hung"], summary["wrong_tokens"]) == (5, 0, 0)
    assert summary["leaked_blocks"] == 0
    assert all(check["ok"] for check in summary["invariants"].values()), summary["invariants"]
    assert summary["faults"][0]["recovery_s"] == 2.5  # fault end to the first success
    assert summary["faults"][0]["first_hit_s"] == 15.0  # hits grew again at t=40


def test_each_broken_invariant_is_named() -> None:
    records = [
        record("pool", 10, ok=False, hung=True, error="TimeoutError"),
        record("pool", 20, ok=False, wrong=True),
        record("pd", 30, ok=False, error="Bad Gateway"),
        record("offload", 40, max_gap=9.0),
    ]
    growing = [100_000, 104_000, 108_000, 112_000, 116_000, 120_000]  # the second half
    run = samples([100_000] * 5 + growing, [0.0] * 11)
    held = {"usage": 0.25, "blocks": 64.0}
    summary = summarise(records, run, [], {"pool": held}, end=100.0, still_open=1)
    assert (summary["hung"], summary["wrong_tokens"], summary["requests_failed"]) == (2, 1, 1)
    assert summary["leaked_blocks"] == 16
    failed = {name for name, check in summary["invariants"].items() if not check["ok"]}
    assert failed == {
        "no_hung_request",
        "no_wrong_tokens",
        "no_leaked_blocks",
        "rss_growth_bounded",
        "token_gaps_bounded",
    }


def test_metrics_page_is_read_summed_over_labels() -> None:
    page = "\n".join(
        [
            "# HELP vllm:kv_cache_usage_perc KV-cache usage.",
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.125',
            'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 64.0',
            'vllm:prefix_cache_hits_total{engine="1",model_name="m"} 32.0',
            'vllm:external_prefix_cache_hits_total{engine="0",model_name="m"} 96.0',
            'vllm:cache_config_info{block_size="32",num_gpu_blocks="64"} 1.0',
        ]
    )
    assert parse_metrics(page) == {"usage": 0.125, "hits": 96.0, "ext_hits": 96.0, "blocks": 64.0}


def test_log_lines_count_new_lines_of_known_logs_only(tmp_path: Path) -> None:
    old, new = tmp_path / "prefill.1.log", tmp_path / "prefill.2.log"
    old.write_text("WARNING before the fault\n", encoding="utf-8")
    offsets = log_offsets([old])
    old.write_text(
        "WARNING before the fault\n(EngineCore) WARNING peer gone\nINFO fine\n"
        "E1202 05:46:59.2 tcp_transport.h:518] ClientSession: no progress\n",
        encoding="utf-8",
    )
    new.write_text("WARNING start-up chatter of a new instance\n", encoding="utf-8")
    lines = log_lines_since(offsets, [old, new])
    assert (lines["ours"], lines["mooncake"]) == (1, 1)


def test_the_layerwise_pair_runs_apart_on_a_small_machine_and_not_in_short_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from soaklib import layerwise

    monkeypatch.setattr(layerwise, "_available_gb", lambda: 64.0)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert layerwise.placement(30, "auto") == "phase"
    assert layerwise.placement(2, "auto") == "off"  # the CI sample keeps its length
    assert layerwise.placement(2, "phase") == "phase"
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert layerwise.placement(30, "auto") == "beside"


def test_the_late_push_fault_stops_the_layerwise_prefill_for_its_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import signal
    import time
    from types import SimpleNamespace

    from soaklib import faults

    sent: list[tuple[signal.Signals, float]] = []
    prefill = SimpleNamespace(url="http://lw", signal=lambda s: sent.append((s, time.monotonic())))
    part = SimpleNamespace(url="http://x", signal=lambda s: None)
    net = {"pool": SimpleNamespace(address="a")}
    pool = SimpleNamespace(network=net, address="m", client=part, master=part)
    parts = SimpleNamespace(prefill=part, decode=part, pool_engine=part, pool=pool)
    assert "layerwise_late_push" not in faults.actions(parts, 30)  # no pair, no such fault
    monkeypatch.setattr(faults, "LATE_PUSH_S", 0.2)
    peer, action = faults.actions(SimpleNamespace(**vars(parts), lw_prefill=prefill), 30)[
        "layerwise_late_push"
    ]
    assert peer == "http://lw"
    action(Fault("layerwise_late_push", "layerwise", peer, start=0.0))
    assert [s for s, _ in sent] == [signal.SIGSTOP, signal.SIGCONT]
    assert sent[1][1] - sent[0][1] >= 0.2


def test_a_restart_that_exits_before_serving_is_started_again_and_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from soaklib import faults

    monkeypatch.setattr(faults, "KILL_DOWN_S", 0.0)
    outcomes: list[BaseException | None] = [RuntimeError("exited 1: bind failed"), None]
    kills: list[object] = []

    def restart() -> None:
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    engine = SimpleNamespace(url="http://e", signal=kills.append, restart=restart)
    part = SimpleNamespace(url="http://x", signal=lambda s: None)
    pool = SimpleNamespace(
        network={"pool": SimpleNamespace(address="a")}, address="m", client=part, master=part
    )
    parts = SimpleNamespace(prefill=part, decode=part, pool_engine=engine, pool=pool)
    _, action = faults.actions(parts, 30)["pool_engine_restart"]
    fault = Fault("pool_engine_restart", "pool", "http://e", start=0.0)
    action(fault)
    assert outcomes == [] and len(kills) == 2  # the fault's SIGKILL, one for the failed start
    assert fault.extra["failed_starts"] == ["exited 1: bind failed"]
    summary = summarise([], [], [fault], {"pool": IDLE}, 60.0, 0)
    assert summary["failed_starts"] == 1
    # A part that never comes up fails the track: the soak says so, it does not retry forever.
    outcomes[:] = [RuntimeError(f"exited {i}") for i in range(faults.RESTART_ATTEMPTS)]
    with pytest.raises(RuntimeError, match=f"exited {faults.RESTART_ATTEMPTS - 1}"):
        action(Fault("pool_engine_restart", "pool", "http://e", start=0.0))


def test_a_phase_pair_is_reported_for_memory_but_not_judged() -> None:
    growing = [100_000, 104_000, 108_000, 112_000, 116_000, 120_000]
    run = samples([100_000] * 5 + growing, [0.0] * 11)
    for sample in run:
        sample["rss_kb"]["lw_prefill#1"] = sample["rss_kb"].pop("pool#1")
    records = [record("layerwise", 50, max_gap=0.3)]
    judged = summarise(records, run, [], {"pool": IDLE}, end=100.0, still_open=0)
    apart = summarise(records, run, [], {"pool": IDLE}, 100.0, 0, ("lw_prefill",))
    assert not judged["invariants"]["rss_growth_bounded"]["ok"]
    assert apart["invariants"]["rss_growth_bounded"]["ok"]
    assert apart["rss_second_half"]["lw_prefill#1"]["growth_pct"] > 5.0  # still reported
    assert apart["max_token_gap_s"]["layerwise"] == 0.3
