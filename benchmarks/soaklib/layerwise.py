"""Where the soak runs its layerwise P/D pair, and its own phase when the pair runs apart.

The pair (`lw_prefill`, `lw_decode`, `MooncakeLayerwiseConnector` behind `examples/pd_proxy.py
--layerwise`) is the fault `layerwise_late_push`'s stage. Two more engines under load beside the
other five fit a machine with a core per engine (`BESIDE_CORES`) and `BESIDE_MEMORY_GB` free:
then its load and its fault track run with the others. Elsewhere (this project's 2-core machine)
they run in a phase of their own right after the main traffic, `PHASE_S` of traffic through
the layerwise proxy with the same prompts, references and fault schedule rules; the pair is
started with the other engines, idle until then. Runs shorter than `MIN_MINUTES` (the CI
sample) leave the pair out.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from .faults import Fault, Track
from .load import Load, Prompt, Record

__all__ = ["MIN_MINUTES", "PHASE_S", "placement", "run_phase"]

BESIDE_CORES = 7
BESIDE_MEMORY_GB = 16.0
MIN_MINUTES = 5.0
PHASE_S = 150.0
PHASE_RECOVERY_S = 20.0


def _available_gb() -> float:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / (1 << 20)
    except OSError:
        pass
    return 0.0


def placement(minutes: float, mode: str) -> str:
    """`"beside"`, `"phase"` or `"off"` for `--layerwise mode` (`auto`: by the machine)."""
    if mode != "auto":
        return mode
    if minutes < MIN_MINUTES:
        return "off"
    fits = (os.cpu_count() or 1) >= BESIDE_CORES and _available_gb() >= BESIDE_MEMORY_GB
    return "beside" if fits else "phase"


def run_phase(
    run: Any,
    model: str,
    prompts: list[Prompt],
    refs: list[str],
    *,
    seed: int,
    t0: float,
    on_event: Callable[[str], None],
) -> tuple[list[Record], list[Fault]]:
    """`PHASE_S` of traffic through the layerwise proxy (`run.lw_proxy`) with its late-push
    track; the records and faults (times since `t0`, like the main run's)."""
    load = Load(
        {"layerwise": run.lw_proxy.url}, model, prompts, refs, per_target=3, seed=seed, t0=t0
    )
    now = time.perf_counter() - t0
    track = Track(
        "layerwise", run, minutes=PHASE_S / 60, seed=seed, t0=t0, deadline=now + PHASE_S - 10,
        recovery_s=PHASE_RECOVERY_S, on_event=on_event, logs=run.log_files,
    )  # fmt: skip
    on_event(f"layerwise phase: {PHASE_S:.0f} s of traffic through {run.lw_proxy.url}")
    load.start()
    track.start()
    started = time.perf_counter()
    while time.perf_counter() - started < PHASE_S or track.is_alive():
        time.sleep(2)
    load.stop()
    if track.error is not None:
        on_event(f"layerwise track failed: {track.error!r}")
    return load.records, track.faults
