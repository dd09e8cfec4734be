"""The soak's faults: what each does to which part, and the seeded schedule that runs them.

Two tracks run side by side, each on its own parts, so one run fits every kind:
- `pd`: `prefill_kill` (SIGKILL, restart on the same port), `prefill_stop` (SIGSTOP, SIGCONT
  after the hold), `decode_kill`;
- `pool`: `pool_link_down` (the pool host's switch port down, up after the hold),
  `pool_client_kill` (the standalone `mooncake_client` SIGKILLed, restarted empty under the same
  name), `master_kill` (restart on the same ports), `master_stop` (SIGSTOP, SIGCONT after the
  hold), `pool_engine_restart` (the AscendStoreConnector engine SIGKILLed and started again
  while its prefixes sit in the pool: its new instance must hit them);
- `layerwise` (only with the layerwise P/D pair, `layerwise.py`): `layerwise_late_push` (the
  layerwise prefill SIGSTOPped `LATE_PUSH_S`: requests it prefills get their layers that late,
  while the decode runs the others).

Each track shuffles its kinds with the run's seed, runs the whole list once whatever the time,
then more rounds while they fit before the deadline; every fault is followed by a quiet
recovery window. Holds are `HOLD_S` for a 30-minute run, scaled down with `--minutes` but never
below `MIN_HOLD_S`: each stays longer than the bounds it tests (Mooncake's TCP timeouts, the
pool's retry interval, the client TTL).
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .logs import log_lines_since, log_offsets

__all__ = ["HOLD_S", "KINDS", "LAYERWISE_TRACK", "Fault", "Track", "hold_s"]

FULL_MINUTES = 30.0
HOLD_S = {"prefill_stop": 20.0, "pool_link_down": 30.0, "master_stop": 45.0}
MIN_HOLD_S = {"prefill_stop": 10.0, "pool_link_down": 15.0, "master_stop": 15.0}
KILL_DOWN_S = 2.0  # a killed part stays down this long before its restart
# A restarted part that exits before it serves is started again, as a supervisor (systemd,
# Kubernetes) would; each failed start is kept in the fault's `failed_starts`.
RESTART_ATTEMPTS = 3
TRACKS = {
    "pd": ("prefill_kill", "prefill_stop", "decode_kill"),
    "pool": (
        "pool_link_down",
        "pool_client_kill",
        "master_kill",
        "master_stop",
        "pool_engine_restart",
    ),
}
KINDS = tuple(k for kinds in TRACKS.values() for k in kinds)
# The layerwise P/D pair's track, run only when the soak has the pair (`layerwise.py`): its
# prefill stopped `LATE_PUSH_S`, so its layer pushes reach the decode that late.
LAYERWISE_TRACK = {"layerwise": ("layerwise_late_push",)}
LATE_PUSH_S = 3.0
# Rough seconds a fault takes, to decide whether one more round fits before the deadline.
_COST_S = {"prefill_kill": 60.0, "decode_kill": 60.0, "pool_engine_restart": 60.0}


def hold_s(kind: str, minutes: float) -> float:
    """The hold of a `kind` with a hold (stop, link down) in a run of `minutes`."""
    scale = min(1.0, minutes / FULL_MINUTES)
    return max(MIN_HOLD_S[kind], HOLD_S[kind] * scale)


@dataclass
class Fault:
    """One fault: times in seconds since the run began; `end` is when the part was given back
    (continued, link up, restart issued)."""

    kind: str
    track: str
    peer: str
    start: float
    end: float = 0.0
    ready: float = 0.0  # when a restarted part served again (= end for holds)
    window_end: float = 0.0  # end of its recovery window
    extra: dict[str, Any] = field(default_factory=dict)


Action = Callable[[Fault], float]


def _kill_restart(part: Any, pool: Any = None) -> Action:
    """SIGKILL `part`, keep it down, restart it; returns when it serves, its restart time.

    Raises:
        RuntimeError: the part exited before serving on each of `RESTART_ATTEMPTS` starts.
    """

    def run(fault: Fault) -> float:
        part.signal(signal.SIGKILL)
        time.sleep(KILL_DOWN_S)
        restarted = time.perf_counter()
        for attempt in range(1, RESTART_ATTEMPTS + 1):
            try:
                _start_again(part, pool)
                return restarted
            except RuntimeError as exc:  # exited before serving; the message ends in its log
                if attempt == RESTART_ATTEMPTS:
                    raise
                fault.extra.setdefault("failed_starts", []).append(str(exc)[-2000:])
                part.signal(signal.SIGKILL)
                time.sleep(KILL_DOWN_S * attempt)
        raise AssertionError("unreachable")

    return run


def _start_again(part: Any, pool: Any) -> None:
    if hasattr(part, "restart"):
        part.restart()
        return
    part.respawn()
    if pool is not None:
        pool.wait_mounted()


def _hold(begin: Callable[[], None], finish: Callable[[], None], hold: float) -> Action:
    def run(_: Fault) -> float:
        begin()
        time.sleep(hold)
        finish()
        return time.perf_counter()

    return run


def actions(parts: Any, minutes: float) -> dict[str, tuple[str, Action]]:
    """kind -> (peer it hits, the fault: returns `perf_counter()` at its end)."""
    pool = parts.pool
    stop, cont = signal.SIGSTOP, signal.SIGCONT
    net = pool.network
    return {
        "prefill_kill": (parts.prefill.url, _kill_restart(parts.prefill)),
        "prefill_stop": (
            parts.prefill.url,
            _hold(
                lambda: parts.prefill.signal(stop),
                lambda: parts.prefill.signal(cont),
                hold_s("prefill_stop", minutes),
            ),
        ),
        "decode_kill": (parts.decode.url, _kill_restart(parts.decode)),
        "pool_link_down": (
            net["pool"].address,
            _hold(
                lambda: net.cut("pool"),
                lambda: net.restore("pool"),
                hold_s("pool_link_down", minutes),
            ),
        ),
        "pool_client_kill": (net["pool"].address, _kill_restart(pool.client, pool)),
        "master_kill": (pool.address, _kill_restart(pool.master, pool)),
        "master_stop": (
            pool.address,
            _hold(
                lambda: pool.master.signal(stop),
                lambda: pool.master.signal(cont),
                hold_s("master_stop", minutes),
            ),
        ),
        "pool_engine_restart": (parts.pool_engine.url, _kill_restart(parts.pool_engine)),
        **_late_push(getattr(parts, "lw_prefill", None)),
    }


def _late_push(prefill: Any) -> dict[str, tuple[str, Action]]:
    if prefill is None:
        return {}
    stop, cont = signal.SIGSTOP, signal.SIGCONT
    late = _hold(lambda: prefill.signal(stop), lambda: prefill.signal(cont), LATE_PUSH_S)
    return {"layerwise_late_push": (prefill.url, late)}


class Track(threading.Thread):
    """One track's faults (see the module docstring), run in a thread.

    Args:
        name: "pd" or "pool".
        parts: the running parts (`prefill`, `decode`, `pool`, `pool_engine`).
        minutes: the run's length (scales the holds).
        seed: the run's seed.
        t0: `time.perf_counter()` at the run's start.
        deadline: seconds since `t0` after which no new round starts.
        recovery_s: the quiet window after each fault.
        on_event: called with a one-line message at each fault and each recovery.
        logs: returns every part's log files (asked at each fault: restarts add files).
    """

    def __init__(
        self,
        name: str,
        parts: Any,
        *,
        minutes: float,
        seed: int,
        t0: float,
        deadline: float,
        recovery_s: float,
        on_event: Callable[[str], None],
        logs: Callable[[], list[Path]],
    ) -> None:
        super().__init__(name=f"soak-{name}", daemon=True)
        self.track, self.t0, self.deadline = name, t0, deadline
        self.recovery_s, self.on_event, self.logs = recovery_s, on_event, logs
        self.rng = random.Random(f"{seed}-{name}")
        self.actions = actions(parts, minutes)
        self.faults: list[Fault] = []
        self.error: BaseException | None = None
        self.stop_event = threading.Event()

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def run(self) -> None:
        try:
            # Traffic first: the pool and the caches hold prefixes before anything breaks.
            self.stop_event.wait(self.rng.uniform(1.0, 1.5) * max(20.0, self.recovery_s))
            first = True
            while not self.stop_event.is_set():
                kinds = list({**TRACKS, **LAYERWISE_TRACK}[self.track])
                self.rng.shuffle(kinds)
                for kind in kinds:
                    cost = _COST_S.get(kind, 30.0) + self.recovery_s
                    if not first and self.now() + cost > self.deadline:
                        return
                    self._one(kind)
                first = False
        except BaseException as exc:  # reported by the caller
            self.error = exc
            self.on_event(f"track {self.track} stopped: {exc!r}")

    def _one(self, kind: str) -> None:
        peer, action = self.actions[kind]
        offsets = log_offsets(self.logs())
        fault = Fault(kind, self.track, peer, start=self.now())
        self.on_event(f"fault {kind} on {peer}")
        self.faults.append(fault)
        fault.end = action(fault) - self.t0
        fault.ready = self.now()
        self.on_event(f"fault {kind} on {peer} over ({fault.ready - fault.start:.0f} s)")
        self.stop_event.wait(self.recovery_s * self.rng.uniform(1.0, 1.5))
        fault.window_end = self.now()
        lines = log_lines_since(offsets, self.logs())
        fault.extra.update(
            log_lines=lines["ours"],
            log_lines_mooncake=lines["mooncake"],
            log_examples=lines["examples"],
        )
