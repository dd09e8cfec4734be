"""Plot `benchmarks/serve_bench.py`'s results: one PNG per figure, beside `summary.json`.

Run (needs matplotlib: `pip install -e '.[bench]'`):

    .venv/bin/python benchmarks/plot_serve.py                        # benchmarks/results/serve
    .venv/bin/python benchmarks/plot_serve.py --results path/to/dir  # another summary.json

Figures, each with one panel per dataset and one group of bars per configuration (`single`,
`offload`, `pool`, `pd`), as `vllm bench serve` measured them:

- `ttft.png`: time to first token, p50 and p99 (ms);
- `itl.png`: inter-token latency, p50 and p99 (ms), per streamed chunk as vLLM's client counts
  it (several tokens arriving in one read count as one gap of ~0 ms);
- `tpot.png`: time per output token after the first, p50 and p99 (ms);
- `throughput.png`: output throughput (tokens/s) and request throughput (requests/s), one bar
  per dataset.

Titles name the model, the machine and the date of the summary. A configuration whose run failed
(an `error` entry) shows an empty slot labelled "failed"; one not run for a dataset, "not run".
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import bench_cli

try:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes
except ImportError:  # `--help` still works; main() says what to install
    plt = None

RESULTS = Path(__file__).resolve().parent / "results" / "serve"
CONFIG_ORDER = ("single", "offload", "pool", "pd")
PERCENTILES = ("50", "99")
LATENCIES = {
    "ttft": ("ttft_ms", "Time to first token"),
    "itl": ("itl_ms", "Inter-token latency"),
    "tpot": ("tpot_ms", "Time per output token"),
}
THROUGHPUTS = (
    ("output_throughput_tok_s", "Output throughput (tokens/s)"),
    ("request_throughput_req_s", "Request throughput (requests/s)"),
)
BAR_WIDTH = 0.38


def configs_of(by_config: dict[str, Any]) -> list[str]:
    """The configurations present, in the usual order first."""
    known = [c for c in CONFIG_ORDER if c in by_config]
    return known + sorted(c for c in by_config if c not in CONFIG_ORDER)


def subtitle(summary: dict[str, Any]) -> str:
    settings = summary.get("settings", {})
    return (
        f"{summary.get('model', '?')}; {summary.get('machine', '?')}; {summary.get('date', '?')}\n"
        f"{settings.get('num_prompts', '?')} prompts, {settings.get('input_len', '?')} tokens in, "
        f"{settings.get('output_len', '?')} out, concurrency {settings.get('max_concurrency', '?')}"
        f"; vLLM {summary.get('versions', {}).get('vllm', '?')}"
    )


def grouped_bars(
    ax: Axes, groups: list[str], series: dict[str, list[float | None]], unit: str
) -> None:
    """Bars of each series side by side per group, values on top; None = failed, NaN = not run."""
    width = min(BAR_WIDTH, 0.8 / max(len(series), 1))
    for i, (label, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        heights = [0.0 if v is None or math.isnan(v) else v for v in values]
        bars = ax.bar(xs, heights, width, label=label)
        ax.bar_label(bars, labels=[bar_text(v) for v in values], fontsize=7, padding=2)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel(unit)
    ax.margins(y=0.15)
    ax.legend(fontsize=8)


def bar_text(v: float | None) -> str:
    if v is None:
        return "failed"
    if math.isnan(v):
        return "not run"
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def value(entry: dict[str, Any], key: str, sub: str | None = None) -> float | None:
    """`entry[key]` (or `entry[key][sub]`) as a float; None for a failed run or a missing key."""
    if "error" in entry:
        return None
    got = entry.get(key)
    if sub is not None and isinstance(got, dict):
        got = got.get(sub)
    return float(got) if isinstance(got, (int, float)) else None


def plot_latency(summary: dict[str, Any], name: str, out_dir: Path) -> Path:
    """`<name>.png`: p50/p99 of one latency, a panel per dataset."""
    key, title = LATENCIES[name]
    results = summary["results"]
    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 4.2), squeeze=False)
    for ax, (dataset, by_config) in zip(axes[0], sorted(results.items()), strict=True):
        configs = configs_of(by_config)
        series = {f"p{p}": [value(by_config[c], key, p) for c in configs] for p in PERCENTILES}
        grouped_bars(ax, configs, series, "ms")
        ax.set_title(f"dataset: {dataset}", fontsize=10)
        ax.set_xlabel("configuration")
    return save(fig, f"{title}, `vllm bench serve`", summary, out_dir / f"{name}.png")


def plot_throughput(summary: dict[str, Any], out_dir: Path) -> Path:
    """`throughput.png`: output and request throughput, a bar per dataset."""
    results = summary["results"]
    datasets = sorted(results)
    configs = configs_of({c: None for d in datasets for c in results[d]})
    fig, axes = plt.subplots(1, len(THROUGHPUTS), figsize=(11, 4.2), squeeze=False)
    for ax, (key, label) in zip(axes[0], THROUGHPUTS, strict=True):
        series = {
            d: [value(results[d][c], key) if c in results[d] else math.nan for c in configs]
            for d in datasets
        }
        grouped_bars(ax, configs, series, label.split(" (")[1].rstrip(")"))
        ax.set_title(label.split(" (")[0], fontsize=10)
        ax.set_xlabel("configuration")
    return save(fig, "Throughput, `vllm bench serve`", summary, out_dir / "throughput.png")


def save(fig: Any, title: str, summary: dict[str, Any], path: Path) -> Path:
    fig.suptitle(f"{title}\n{subtitle(summary)}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = bench_cli.parser(__doc__)
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of summary.json")
    args = parser.parse_args(argv)
    if plt is None:
        raise SystemExit("matplotlib is missing: pip install 'vam[bench]'")
    summary = json.loads((args.results / "summary.json").read_text(encoding="utf-8"))
    if not summary.get("results"):
        raise SystemExit(f"{args.results / 'summary.json'} holds no results")
    written = [plot_latency(summary, name, args.results) for name in LATENCIES]
    written.append(plot_throughput(summary, args.results))
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
