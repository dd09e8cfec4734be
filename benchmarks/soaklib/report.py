"""The soak's verdict: the invariants checked over the records, samples and logs of a run, and
the time series the plot draws.

Bounds stated here (and in the JSON): a request ends within `load.REQUEST_BOUND_S` (else it
hung); no gap between two streamed tokens of a request (a decode step of its engine, plus the
hop) exceeds `STEP_BOUND_S`; a process's resident memory grows at most `RSS_GROWTH_PCT` over
the run's second half; the warning and error lines all logs gain during one fault and its
recovery window stay within `log_budget` (Mooncake's own glog lines are counted apart).
"""

from __future__ import annotations

import statistics
from typing import Any

from .faults import Fault
from .load import REQUEST_BOUND_S, Record

__all__ = ["series", "summarise"]

STEP_BOUND_S = 5.0
RSS_GROWTH_PCT = 5.0
LOG_LINES_PER_FAULT = 40
LOG_LINES_PER_MINUTE = 12  # two peers, each with a line per 10 s
TRACK_TARGET = {"pd": "pd", "pool": "pool", "layerwise": "layerwise"}
TRACK_ENGINE = {"pd": "decode", "pool": "pool", "layerwise": "lw_decode"}
TARGETS = ("pd", "pool", "offload")  # always in the report; "layerwise" when it ran


def _counter_delta(new: float | None, old: float | None) -> float:
    """A counter's growth between two samples; a restarted engine starts again from 0."""
    if new is None or old is None:
        return 0.0
    return new - old if new >= old else new


def _recovery(fault: Fault, records: list[Record], samples: list[dict[str, Any]]) -> None:
    target, engine = TRACK_TARGET[fault.track], TRACK_ENGINE[fault.track]
    ok_ends = [r.end for r in records if r.target == target and r.ok and r.end > fault.end]
    fault.extra["recovery_s"] = round(min(ok_ends) - fault.end, 2) if ok_ends else None
    prev = None
    for sample in samples:
        figures = sample["engines"].get(engine) or {}
        hits = figures.get("hits", 0.0) + figures.get("ext_hits", 0.0) if figures else None
        if sample["t"] > fault.end and _counter_delta(hits, prev) > 0:
            fault.extra["first_hit_s"] = round(sample["t"] - fault.end, 2)
            break
        prev = hits if hits is not None else prev
    else:
        fault.extra["first_hit_s"] = None


def _rss(samples: list[dict[str, Any]], end: float) -> dict[str, Any]:
    """Growth of each process group's memory over the second half of the traffic."""
    half = [s for s in samples if end / 2 <= s["t"] <= end]
    out: dict[str, Any] = {}
    for name in sorted({n for s in half for n in s["rss_kb"]}):
        engine = name.split("#")[0]
        # An engine counts from when it serves (its start-up is not growth).
        series = [
            (s["t"], s["rss_kb"][name])
            for s in half
            if name in s["rss_kb"] and (engine not in s["engines"] or s["engines"][engine])
        ]
        if len(series) < 6 or series[-1][0] - series[0][0] < 0.8 * (end / 2):
            continue  # restarted in the second half: too short a life to judge
        first = statistics.median(v for _, v in series[:3])
        last = statistics.median(v for _, v in series[-3:])
        minutes = (series[-1][0] - series[0][0]) / 60
        out[name] = {
            "first_mb": round(first / 1024, 1),
            "last_mb": round(last / 1024, 1),
            "growth_pct": round(100 * (last - first) / first, 2),
            "slope_mb_per_min": round((last - first) / 1024 / minutes, 3),
        }
    return out


def _leaks(final: dict[str, dict[str, float] | None]) -> tuple[int, dict[str, Any]]:
    total, detail = 0, {}
    for name, figures in final.items():
        if figures is None:
            detail[name] = "no /metrics answer"
            continue
        blocks = round(figures.get("usage", 0.0) * figures.get("blocks", 0.0))
        total += blocks
        detail[name] = {"usage": figures.get("usage"), "blocks_held": blocks}
    return total, detail


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def series(
    records: list[Record], samples: list[dict[str, Any]], end: float, bucket_s: float
) -> list[dict[str, Any]]:
    """Per `bucket_s`: completions/s, errors (failed, hung, wrong), TTFT p50/p99 (s) and the
    prefix hit rate of every engine together (local + connector hits over queried tokens)."""
    out = []
    t = 0.0
    while t < end:
        inside = [r for r in records if t <= r.end < t + bucket_s]
        ttfts = [r.ttft for r in inside if r.ok]
        window = [s for s in samples if t <= s["t"] < t + bucket_s]
        out.append(
            {
                "t": t,
                "rate": sum(r.ok for r in inside) / bucket_s,
                "errors": sum(not r.ok for r in inside),
                "ttft_p50": _pct(ttfts, 0.5),
                "ttft_p99": _pct(ttfts, 0.99),
                "hit_rate": _hit_rate(samples, window),
            }
        )
        t += bucket_s
    return out


def _hit_rate(samples: list[dict[str, Any]], window: list[dict[str, Any]]) -> float | None:
    if not window:
        return None
    i = samples.index(window[0])
    before = samples[i - 1] if i > 0 else window[0]
    hits = queries = 0.0
    for name, last in window[-1]["engines"].items():
        first = before["engines"].get(name)
        if not last or not first:
            continue
        hits += _counter_delta(last.get("hits"), first.get("hits"))
        hits += _counter_delta(last.get("ext_hits"), first.get("ext_hits"))
        queries += _counter_delta(last.get("queries"), first.get("queries"))
    return hits / queries if queries else None


def summarise(
    records: list[Record],
    samples: list[dict[str, Any]],
    faults: list[Fault],
    final: dict[str, dict[str, float] | None],
    end: float,
    still_open: int,
    rss_unjudged: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The run's JSON (see the module docstring for the bounds); `end` is when traffic stopped,
    `final` the engines' metrics after it settled, `still_open` requests never answered.
    `rss_unjudged`: parts whose memory is reported but not held to the bound (idle until a
    short phase at the end: their growth there is their warm-up)."""
    for fault in faults:
        _recovery(fault, records, samples)
    leaked, leak_detail = _leaks(final)
    rss = _rss(samples, end)
    gaps = {t: max((r.max_gap for r in records if r.target == t), default=0.0) for t in TARGETS}
    if any(r.target == "layerwise" for r in records):
        gaps["layerwise"] = max(r.max_gap for r in records if r.target == "layerwise")
    summary = {
        "requests_ok": sum(r.ok for r in records),
        "requests_failed": sum(not r.ok and not r.hung and not r.wrong for r in records),
        "hung": sum(r.hung for r in records) + still_open,
        "wrong_tokens": sum(r.wrong for r in records),
        "leaked_blocks": leaked,
        "faults": [_fault_json(f) for f in faults],
        # Restarts that exited before serving and were started again (their log tails are
        # in the fault's `failed_starts`).
        "failed_starts": sum(len(f.extra.get("failed_starts", [])) for f in faults),
        "bounds": {
            "request_s": REQUEST_BOUND_S,
            "step_s": STEP_BOUND_S,
            "rss_growth_pct": RSS_GROWTH_PCT,
            "log_lines_per_fault": LOG_LINES_PER_FAULT,
            "log_lines_per_fault_minute": LOG_LINES_PER_MINUTE,
        },
        "per_target": _per_target(records),
        "max_token_gap_s": {k: round(v, 3) for k, v in gaps.items()},
        "idle_after_traffic": leak_detail,
        "rss_second_half": rss,
        "errors_seen": sorted({r.error for r in records if r.error})[:20],
        "traffic_s": round(end, 1),
        "rss_unjudged": list(rss_unjudged),
    }
    summary["invariants"] = _invariants(summary, faults)
    return summary


def log_budget(fault: Fault) -> int:
    """Warning lines a fault may cost: `LOG_LINES_PER_FAULT`, plus one per peer per 10 s for as
    long as it lasts (rate-limited "still failing" lines), never one per request."""
    minutes = max(0.0, fault.window_end - fault.start) / 60
    return int(LOG_LINES_PER_FAULT + LOG_LINES_PER_MINUTE * minutes)


def _fault_json(fault: Fault) -> dict[str, Any]:
    return {
        "kind": fault.kind,
        "track": fault.track,
        "peer": fault.peer,
        "start": round(fault.start, 2),
        "end": round(fault.end, 2),
        "ready": round(fault.ready, 2),
        "window_end": round(fault.window_end, 2),
        **fault.extra,
    }


def _per_target(records: list[Record]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in records:
        entry = out.setdefault(r.target, {"ok": 0, "failed": 0, "hung": 0, "wrong": 0})
        key = "ok" if r.ok else "hung" if r.hung else "wrong" if r.wrong else "failed"
        entry[key] += 1
    return out


def _invariants(summary: dict[str, Any], faults: list[Fault]) -> dict[str, dict[str, Any]]:
    noisy = [f.kind for f in faults if f.extra.get("log_lines", 0) > log_budget(f)]
    unjudged = set(summary["rss_unjudged"])
    grown = [
        n
        for n, v in summary["rss_second_half"].items()
        if v["growth_pct"] > RSS_GROWTH_PCT and n.split("#")[0] not in unjudged
    ]
    slow = [t for t, g in summary["max_token_gap_s"].items() if g > STEP_BOUND_S]
    no_hit = [
        f.kind for f in faults if f.kind == "pool_engine_restart" and not f.extra.get("first_hit_s")
    ]
    checks = {
        "no_hung_request": (summary["hung"] == 0, summary["hung"]),
        "no_wrong_tokens": (summary["wrong_tokens"] == 0, summary["wrong_tokens"]),
        "no_leaked_blocks": (summary["leaked_blocks"] == 0, summary["leaked_blocks"]),
        "rss_growth_bounded": (not grown, grown),
        "token_gaps_bounded": (not slow, summary["max_token_gap_s"]),
        "logs_per_fault": (not noisy, noisy),
        "restarted_engine_hits_pool": (not no_hit, no_hit),
    }
    return {name: {"ok": ok, "detail": detail} for name, (ok, detail) in checks.items()}
