"""Samples taken while the soak runs: each engine's `/metrics` and each process's memory.

Every `interval_s` the sampler reads, per engine, the KV cache usage gauge and the prefix-cache
counters (local and connector, `vllm:prefix_cache_*` and `vllm:external_prefix_cache_*`), and
per process group the resident memory (VmRSS, summed over the group's processes, kB). An engine
that does not answer within `METRICS_TIMEOUT_S` (stopped, restarting) is `None` in that sample.
"""

from __future__ import annotations

import os
import re
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

__all__ = ["Monitor", "parse_metrics", "read_metrics", "rss_kb"]

METRICS_TIMEOUT_S = 2.0
_WANTED = {
    "vllm:kv_cache_usage_perc": "usage",
    "vllm:prefix_cache_queries_total": "queries",
    "vllm:prefix_cache_hits_total": "hits",
    "vllm:external_prefix_cache_queries_total": "ext_queries",
    "vllm:external_prefix_cache_hits_total": "ext_hits",
}
_LINE = re.compile(r"^([a-z_:]+)(\{[^}]*\})? (\S+)$")
_BLOCKS = re.compile(r'^vllm:cache_config_info\{[^}]*num_gpu_blocks="(\d+)"', re.MULTILINE)


def parse_metrics(text: str) -> dict[str, float]:
    """The figures of `_WANTED` from a Prometheus text page (summed over label sets), plus
    `blocks` (the engine's KV cache size in blocks) when the page names it."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match and match.group(1) in _WANTED:
            key = _WANTED[match.group(1)]
            out[key] = out.get(key, 0.0) + float(match.group(3))
    blocks = _BLOCKS.search(text)
    if blocks:
        out["blocks"] = float(blocks.group(1))
    return out


def read_metrics(url: str, timeout_s: float = METRICS_TIMEOUT_S) -> dict[str, float] | None:
    """`parse_metrics` of `url`/metrics, None when it does not answer in time."""
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=timeout_s) as response:
            return parse_metrics(response.read().decode())
    except (OSError, ValueError):
        return None


def rss_kb(pids: list[int]) -> int:
    """Resident memory of `pids` together, kB (processes gone meanwhile count 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total


class Monitor:
    """A sampler thread (see the module docstring).

    Args:
        engines: name -> base URL of each engine's API server.
        processes: returns instance name -> pids, asked at every sample (restarts change it).
        t0: `time.perf_counter()` at the run's start.
        interval_s: seconds between samples.
    """

    def __init__(
        self,
        engines: dict[str, str],
        processes: Callable[[], dict[str, list[int]]],
        t0: float,
        interval_s: float = 2.0,
    ) -> None:
        self.engines, self.processes = engines, processes
        self.t0, self.interval_s = t0, interval_s
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Monitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def sample(self) -> dict[str, Any]:
        """Take one sample now and keep it."""
        t = time.perf_counter() - self.t0
        metrics = {name: read_metrics(url) for name, url in self.engines.items()}
        rss = {name: rss_kb(pids) for name, pids in self.processes().items() if pids}
        # The machine's load (other jobs share it): beside each sample, for the report.
        entry = {"t": round(t, 2), "engines": metrics, "rss_kb": rss, "load1": os.getloadavg()[0]}
        self.samples.append(entry)
        return entry

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            self.sample()
            self._stop.wait(max(0.0, self.interval_s - (time.perf_counter() - started)))
