"""The floor of the P/D time to first token and the stages above it (issue 21 §3).

`pd_ttft_bench.py` traces its engine calls (`pd_ttft_hooks.install_trace` /
`traced_generate`); this module turns one traced call into stage durations and the run's
samples into the floor and the stage table. All times in seconds, `time.perf_counter()`.

Floor (per repetition, medians over the run): the single engine's whole call for the prompt
(`max_tokens=1`: admission, prefill, output) + one 1-token decode step over the same prompt
length (the second step of a 2-token call on the single engine, fresh prompt) + the KV bytes the
decode side really read (our worker's `bytes_read`) copied once at `memcpy` bandwidth (one
contiguous `torch` copy of that many bytes in the benchmark process, warm buffers).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

STAGES = (
    "pipe",  # the harness's round trip to the engine process (both ways)
    "admission",  # LLM.generate's input processing and add_request, to the first engine step
    "idle_steps",  # engine steps that scheduled nothing (decode: waiting for the KV)
    "get_finished",  # of which: the connector worker's get_finished (ours: the idle-step wait)
    "forward_steps",  # engine steps that scheduled tokens (prefill or the 1-token decode)
    "output",  # after the last step to generate's return
    "handoff_in",  # ours, decode: add_recvs on the engine thread -> the transfer thread's read
    "read",  # ours, decode: the transfer thread's plan and read, to its record
    "handoff_out",  # ours, decode: read recorded -> the get_finished that reports it returns
    "runqueue_wait",  # the engine thread runnable but waiting for a core (another's work)
)


def _steps(events: list[list[Any]]) -> list[tuple[float, float, int]]:
    """(start, end, scheduled tokens) of each engine step."""
    schedules = [e for e in events if e[0] == "schedule"]
    out = []
    for step in (e for e in events if e[0] == "step"):
        tokens = sum(s[3] for s in schedules if step[1] <= s[1] <= step[2])
        out.append((step[1], step[2], tokens))
    return out


def stages(traced: dict[str, Any], called: float, answered: float) -> dict[str, float]:
    """Stage durations of one traced call, `called`/`answered`: the benchmark's own clock
    around `EngineProcess.call`."""
    events = traced["events"]
    steps = _steps(events)
    first = steps[0][0] if steps else traced["returned"]
    last = steps[-1][1] if steps else traced["returned"]
    out = dict.fromkeys(STAGES, 0.0)
    out["pipe"] = (traced["entered"] - called) + (answered - traced["returned"])
    out["admission"] = first - traced["entered"]
    out["output"] = traced["returned"] - last
    for start, end, tokens in steps:
        out["forward_steps" if tokens else "idle_steps"] += end - start
    out["get_finished"] = sum(e[2] - e[1] for e in events if e[0] == "get_finished")
    out["steps"] = float(len(steps))
    out["runqueue_wait"] = float(traced.get("delay_s", 0.0))
    submits = [e for e in events if e[0] == "add_recvs"]
    reads = [e for e in events if e[0] == "receive"]
    records = [e for e in events if e[0] == "record"]
    if submits and reads and records:
        read, record = reads[0], records[0]
        out["handoff_in"] = read[1] - submits[0][2]
        out["read"] = record[1] - read[1]
        reporting = [e for e in events if e[0] == "get_finished" and e[2] >= record[2]]
        if reporting:
            out["handoff_out"] = reporting[0][2] - record[2]
    return out


def decode_step_s(traced: dict[str, Any]) -> float:
    """Duration of the 1-token decode step of a traced 2-token call on a plain engine, minus
    the time its threads waited for a core during that step (`step_delay` events, one per
    step in step order)."""
    steps = _steps(traced["events"])
    delays = [e[2] for e in traced["events"] if e[0] == "step_delay"]
    if len(delays) != len(steps):
        delays = [0.0] * len(steps)
    pairs = zip(steps, delays, strict=True)
    one = [end - start - d for (start, end, tokens), d in pairs if tokens == 1]
    return one[-1] if one else float("nan")


def memcpy_s(nbytes: int, repeats: int = 5) -> float:
    """Median seconds of one contiguous copy of `nbytes` (warm buffers, one torch thread)."""
    import torch

    torch.set_num_threads(1)
    src = torch.ones(max(nbytes, 1), dtype=torch.uint8)
    dst = torch.empty_like(src)
    dst.copy_(src)
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        dst.copy_(src)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _corrected(samples: list[dict[str, float]], walls: list[float]) -> list[float]:
    return [w - x["runqueue_wait"] for w, x in zip(walls, samples, strict=True)]


def floor_table(result: dict[str, Any]) -> str:
    """Markdown: floor parts, and each path's TTFT against the floor (medians, ms), as measured
    and minus the time the engines waited for a core (`runqueue_wait`)."""
    floor = result["floor"]
    single_walls = result["single_s"]
    single_c = _corrected(result["stages"]["single"], single_walls)
    step, copy = _med(floor["decode_step_s"]), _med(floor["memcpy_s"])
    totals = (_med(single_walls) + step + copy, _med(single_c) + step + copy)
    rows = [
        f"floor = single engine {_med(single_walls) * 1e3:.2f} ({_med(single_c) * 1e3:.2f} "
        f"without runqueue waits) + 1-token decode step {step * 1e3:.2f} + "
        f"{_med(floor['kv_bytes']) / 2**10:.0f} KiB at memcpy {copy * 1e3:.3f} = "
        f"**{totals[0] * 1e3:.2f} ({totals[1] * 1e3:.2f}) ms** (medians)",
        "",
        "| path | TTFT ms | / single | / floor | TTFT ms, no runqueue wait | / single | / floor |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    paths = [("single engine", single_walls, single_c)]
    for name, s in result["variants"].items():
        walls = [p + d for p, d in zip(s["prefill"], s["decode"], strict=True)]
        fixed = [
            w - a["runqueue_wait"] - b["runqueue_wait"]
            for w, a, b in zip(walls, s["prefill_stages"], s["decode_stages"], strict=True)
        ]
        paths.append((name, walls, fixed))
    for name, walls, fixed in paths:
        cells = []
        for values, base, total in ((walls, single_walls, totals[0]), (fixed, single_c, totals[1])):
            ttft = _med(values)
            cells += [f"{ttft * 1e3:.1f}", f"{ttft / _med(base):.2f}", f"{ttft / total:.2f}"]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def stage_table(result: dict[str, Any]) -> str:
    """Markdown: median stage durations (ms) of the single call and of each variant's calls."""
    columns = [("single", result["stages"]["single"])]
    for name, s in result["variants"].items():
        columns.append((f"{name} prefill", s["prefill_stages"]))
        columns.append((f"{name} decode", s["decode_stages"]))
    head = "| stage | " + " | ".join(c for c, _ in columns) + " |"
    rows = [head, "|---|" + "---:|" * len(columns)]
    for stage in (*STAGES, "steps"):
        cells = []
        for _, samples in columns:
            values = [x[stage] for x in samples if stage in x]
            scale = 1.0 if stage == "steps" else 1e3
            cells.append(f"{_med(values) * scale:.2f}" if values else "-")
        rows.append(f"| {stage} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
