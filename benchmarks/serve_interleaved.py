"""`vllm bench serve` against several configurations in turn, all started at once (issue 21 §4).

`serve_bench.py` runs one configuration after another: on a shared machine whose load drifts
over minutes, the second configuration can meet twice the load of the first, and their ratio
measures the drift. Here every configuration's services start first, then each round runs the
client once against each of them, rotating which goes first; a round's ratios (throughput of
a configuration / that of `single` in the same round) are taken, and their medians reported.
Every round sends the same prompts (one seed): round 1 finds the host pools empty, later rounds
find there what earlier ones stored (a prefix working set that recurs, as in serving).

    python benchmarks/serve_interleaved.py --rounds 3 --configs single offload pool \\
        --num-prompts 256 --num-prefixes 32 --prefix-len 512 --suffix-len 64 --output-len 16

Takes `serve_bench.py`'s options; `--results` gets `round<N>/<dataset>/<config>.json` and
`interleaved.json` (per round and configuration: the figures, the load average; the medians of
the ratios). Only configurations without P/D (one server each).
"""

from __future__ import annotations

import json
import shutil
import signal
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import serve_bench
from serve_bench import (  # serve_bench puts tests/e2e on the path for these
    MooncakeMaster,
    build_model,
    connector_config,
    log,
    parse_args,
    run_dataset,
    start_server,
    wait_ready,
)

# Every server starts at once; on a loaded 2-core machine that took over 5 minutes.
START_TIMEOUT_S = 1200.0


def start_all(args: Any, logs: Path, stack: ExitStack) -> dict[str, str]:
    """Start every configuration's services side by side; their URLs once all answer."""
    pending = {}
    for config in args.configs:
        (logs / config).mkdir(parents=True, exist_ok=True)
        master = None
        if config == "pool":
            master = MooncakeMaster(logs / config).start()
            stack.callback(master.stop)
        kv = connector_config(config, master)
        pending[config] = start_server(args.model, kv, logs / config / "serve.log", stack)
    for config, (url, server) in pending.items():
        wait_ready(url, server, START_TIMEOUT_S)
        log(f"{config}: ready at {url}")
    return {config: url for config, (url, _) in pending.items()}


def rounds(args: Any, logs: Path, stack: ExitStack) -> list[dict[str, dict[str, Any]]]:
    """Start every configuration, then run `args.rounds` rounds; each round's entries."""
    urls = start_all(args, logs, stack)
    results = args.results
    out = []
    for n in range(args.rounds):
        order = args.configs[n % len(args.configs) :] + args.configs[: n % len(args.configs)]
        args.results = results / f"round{n + 1}"
        entries = {c: run_dataset(args, c, args.datasets[0], urls[c], logs / c) for c in order}
        out.append(entries)
    args.results = results
    return out


def ratios(per_round: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Per configuration: the median over rounds of its output throughput and TTFT p50 over
    `single`'s in the same round."""
    out: dict[str, dict[str, float]] = {}
    for config in per_round[0]:
        tput = [r[config]["output_throughput_tok_s"] / r["single"]["output_throughput_tok_s"]
                for r in per_round]  # fmt: skip
        ttft = [r[config]["ttft_ms"]["50"] / r["single"]["ttft_ms"]["50"] for r in per_round]
        out[config] = {
            "throughput_ratio_median": statistics.median(tput),
            "throughput_ratios": tput,
            "ttft_p50_ratio_median": statistics.median(ttft),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser_argv = list(sys.argv[1:] if argv is None else argv)
    rounds_n = 3
    if "--rounds" in parser_argv:
        i = parser_argv.index("--rounds")
        rounds_n = int(parser_argv[i + 1])
        del parser_argv[i : i + 2]
    args = parse_args(parser_argv)
    args.rounds = rounds_n
    if "single" not in args.configs or "pd" in args.configs:
        print("serve_interleaved: --configs must include single and not pd", file=sys.stderr)
        return 2
    args.configs = ["single", *[c for c in args.configs if c != "single"]]
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    logs = Path(tempfile.mkdtemp(prefix="vam-serve-interleaved-"))
    log(f"building the {args.layers}-layer tiny Llama; logs in {logs}")
    args.model = build_model(args.layers)
    try:
        with ExitStack() as stack:
            per_round = rounds(args, logs, stack)
    finally:
        shutil.rmtree(args.model, ignore_errors=True)
    summary = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "settings": {**serve_bench.SETTINGS, "rounds": args.rounds, "configs": args.configs},
        "rounds": per_round,
        "ratios": ratios(per_round),
    }
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "interleaved.json").write_text(json.dumps(summary, indent=2), "utf-8")
    for config, r in summary["ratios"].items():
        shown = ", ".join(f"{x:.2f}" for x in r["throughput_ratios"])
        log(f"{config}: output throughput / single, median {r['throughput_ratio_median']:.2f} "
            f"(rounds: {shown}); TTFT p50 / single {r['ttft_p50_ratio_median']:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
