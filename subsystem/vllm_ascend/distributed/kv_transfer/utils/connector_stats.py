"""Connector counters reported through vLLM's KV connector metrics interface.

vLLM asks each connector for `get_kv_connector_stats()` after every step: on each worker (the
answers of all workers are merged with `aggregate`) and on the scheduler (merged into the
workers' answer). The merged object's `data` travels to the API server, which rebuilds it with
the connector class's `build_kv_connector_stats(data)` for the periodic log line (`reduce`) and
hands `data` to the `KVConnectorPromMetrics` that `build_prom_metrics` made, for `/metrics`.

- `CounterStats`: a `KVConnectorStats` whose `data` maps counter names to the increase in the
  interval; summed by `aggregate`. A connector family subclasses it with its counter names and
  help texts (`COUNTERS`) and a Prometheus name prefix (`METRIC_PREFIX`).
- `StatsRecorder`: a side's running totals, updated from any thread; `take()` returns the
  increase since the previous `take()` (what vLLM wants per step), `snapshot()` the totals.
- `CounterPromMetrics`: one Prometheus counter per name in `COUNTERS`, labelled per engine.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (
    KVConnectorPromMetrics,
    KVConnectorStats,
)

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.distributed.kv_transfer.kv_connector.v1.metrics import PromMetric, PromMetricT

__all__ = ["CounterPromMetrics", "CounterStats", "StatsRecorder"]


class CounterStats(KVConnectorStats):
    """Counter increases of one connector family over an interval: `data[name]` (int or float,
    e.g. seconds), absent when zero.

    Subclasses set `COUNTERS` (name -> help text; only these names are reported) and
    `METRIC_PREFIX` (e.g. `"vllm:ascend_store_"`: vLLM drops collectors named `vllm...` when
    it builds its loggers, so an engine restarted in one process registers them afresh).
    """

    COUNTERS: ClassVar[Mapping[str, str]] = {}
    METRIC_PREFIX: ClassVar[str] = "vllm:"

    def reset(self) -> None:
        self.data = {}

    def __getitem__(self, name: str) -> float:
        """The increase of counter `name` (0 when absent)."""
        return self.data.get(name, 0)

    def aggregate(self, other: KVConnectorStats) -> KVConnectorStats:
        """Add `other`'s counters into this object (other workers, the scheduler, a later
        interval); returns self."""
        for name, value in other.data.items():
            self.data[name] = self.data.get(name, 0) + value
        return self

    def reduce(self) -> dict[str, int | float]:
        """The non-zero counters, in `COUNTERS` order (the periodic log line)."""
        return {name: self.data[name] for name in self.COUNTERS if self.data.get(name)}

    def is_empty(self) -> bool:
        return not any(self.data.values())


StatsT = TypeVar("StatsT", bound=CounterStats)


class StatsRecorder(Generic[StatsT]):
    """Running totals of a connector side's counters, safe to update from several threads.

    Names outside `kind.COUNTERS` may be counted too (diagnostics that tests read through
    `snapshot()`); only `kind.COUNTERS` go to vLLM.

    Args:
        kind: the family's `CounterStats` subclass.
    """

    def __init__(self, kind: type[StatsT]) -> None:
        self.kind = kind
        self._lock = threading.Lock()
        self._totals: defaultdict[str, float] = defaultdict(int)
        self._taken: dict[str, float] = {}

    def add(self, name: str, value: float = 1) -> None:
        with self._lock:
            self._totals[name] += value

    def snapshot(self) -> dict[str, float]:
        """Every counter's total since the side started (`kind.COUNTERS` included at 0)."""
        with self._lock:
            return {**dict.fromkeys(self.kind.COUNTERS, 0), **self._totals}

    def take(self) -> StatsT | None:
        """The increase of `kind.COUNTERS` since the previous call; None when nothing grew."""
        with self._lock:
            now = {n: self._totals[n] for n in self.kind.COUNTERS if n in self._totals}
            delta = {n: v - self._taken.get(n, 0) for n, v in now.items()}
            self._taken = now
        delta = {n: v for n, v in delta.items() if v}
        return self.kind(data=delta) if delta else None


class CounterPromMetrics(KVConnectorPromMetrics):
    """Prometheus counters `<METRIC_PREFIX><name>` (exposed with `_total`) for a family's
    `COUNTERS`, one child per engine (vLLM's `labelnames`/`per_engine_labelvalues`).

    Args:
        kind: the family's `CounterStats` subclass; the rest as vLLM passes them to
            `build_prom_metrics`.
    """

    def __init__(
        self,
        kind: type[CounterStats],
        vllm_config: VllmConfig,
        metric_types: dict[type[PromMetric], type[PromMetricT]],
        labelnames: list[str],
        per_engine_labelvalues: dict[int, list[object]],
    ) -> None:
        super().__init__(vllm_config, metric_types, labelnames, per_engine_labelvalues)
        self._children: dict[str, dict[int, Any]] = {}
        for name, documentation in kind.COUNTERS.items():
            counter = self._counter_cls(
                name=f"{kind.METRIC_PREFIX}{name}",
                documentation=documentation,
                labelnames=labelnames,
            )
            self._children[name] = {
                engine: counter.labels(*values) for engine, values in per_engine_labelvalues.items()
            }

    def observe(self, transfer_stats_data: dict[str, Any], engine_idx: int = 0) -> None:
        for name, value in transfer_stats_data.items():
            children = self._children.get(name)
            if children is not None and value > 0:
                children[engine_idx].inc(value)
