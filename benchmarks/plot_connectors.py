"""Plot the connector benchmarks of issue 14, goals 1-3: one PNG per figure, beside the raw JSON.

Run (needs matplotlib: `pip install -e '.[bench]'`):

    .venv/bin/python benchmarks/plot_connectors.py                        # benchmarks/results
    .venv/bin/python benchmarks/plot_connectors.py --results path/to/dir  # other JSON files

Reads, from the results folder, and writes there:

- `pd_ttft.png` from `pd_ttft.json` (`pd_ttft_bench.py --json`) and `pd_http_ttft.json`
  (`pd_http_ttft.py --json`): time to first token (ms), bar = median, black mark = minimum;
  left panel in-process (single engine, ours, ours without the idle-step wait, vLLM's
  `MooncakeConnector`), right panel over HTTP (single `vllm serve`, P/D, layerwise P/D); a dashed
  line at 1.6x the single engine's median, the goal;
- `block_copy.png` from `block_copy_hot.json` and `block_copy_cold.json`
  (`bench_block_copy.py --json`): the compiled path's speed as % of one contiguous copy of the
  same bytes (process CPU time, medians), per geometry x blocks, contiguous vs scattered ids,
  one panel per cache state; a dashed line at the 80% goal;
- `offload_hit.png` from `offload_hit.json` (`bench_cpu_offload.py --engine --json`): pass 2
  offload / local hit per executor (wall, and CPU where it covers the whole engine), dots = each
  repetition's wall ratio (those outside 0.5-2.0 drawn at the edge, with a note), a dashed
  line at the 1.05 goal; beside it the pass-2 wall times (ms).

A figure whose JSON is missing is skipped with a note. Titles name the model, the machine and
the date the JSON records (a file without them is titled with its modification date).
"""

from __future__ import annotations

import datetime
import json
import math
import statistics
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
from plot_serve import grouped_bars  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
# The model the P/D benchmarks build (tests/e2e/tiny_model.py, defaults); their JSON omits it.
PD_MODEL = "tiny Llama (tests/e2e/tiny_model.py), 2 layers, bf16"
PD_GOAL = 1.6  # x the single engine's TTFT
COPY_GOAL = 80.0  # % of one contiguous copy
HIT_GOAL = 1.05  # offload / local
# Range of the offload / local axis: a repetition whose local pass stalled (0.3-0.4 s instead
# of ~20 ms, seen under load) would otherwise squash the medians into a line.
RATIO_RANGE = (0.5, 2.0)
IN_PROCESS = {
    "ours_idle_wait": "ours",
    "ours_no_idle_wait": "ours, no\nidle wait",
    "vllm_mooncake": "vLLM's\nMooncakeConnector",
}
HTTP = {"single": "single", "pd": "P/D", "layerwise": "P/D\nlayerwise"}


def load(path: Path) -> dict[str, Any] | None:
    """The JSON at `path`, or None (with a printed note) when the file is missing."""
    if not path.exists():
        print(f"skipped: {path} is missing")
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def origin(data: dict[str, Any], path: Path) -> str:
    """`"<machine>; <date>"` as the JSON records them, else what the file tells."""
    if "machine" in data and "date" in data:
        return f"{data['machine']}; {data['date']}"
    mtime = datetime.datetime.fromtimestamp(path.stat().st_mtime).isoformat(timespec="minutes")
    return f"machine not recorded; file dated {mtime}"


def load_text(data: dict[str, Any]) -> str:
    """`"load average <low>-<high>"` from whichever key the benchmark wrote; "" if none."""
    keys = ("load_average_1m", "load_average", "loadavg_1m_before_after")
    got: list[float] = next((data[k] for k in keys if k in data), [])
    return "load average " + "-".join(f"{x:.1f}" for x in sorted(got)) if got else ""


def save(fig: Any, title: str, lines: list[str], path: Path) -> Path:
    fig.suptitle("\n".join([title, *(line for line in lines if line)]), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def ttft_panel(ax: Axes, labels: list[str], medians: list[float], minima: list[float]) -> None:
    """Bars of the median TTFT (ms) with the minimum marked; the goal from the first (single)."""
    bars = ax.bar(range(len(labels)), medians, 0.6, color="C0", label="median")
    ax.plot(range(len(labels)), minima, "k_", markersize=22, mew=2, label="minimum")
    single = medians[0]
    texts = [f"{m:.1f} ms\n{m / single:.2f}x" for m in medians]
    ax.bar_label(bars, labels=texts, fontsize=7, padding=2)
    ax.axhline(PD_GOAL * single, color="C3", ls="--", lw=1, label=f"goal: {PD_GOAL}x single")
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("time to first token (ms)")
    ax.margins(y=0.2)
    ax.legend(fontsize=7, loc="upper left")


def plot_pd_ttft(results: Path) -> Path | None:
    """`pd_ttft.png`: in-process and HTTP TTFT, one panel each (a panel per JSON found)."""
    paths = [results / "pd_ttft.json", results / "pd_http_ttft.json"]
    found = [(p, d) for p in paths if (d := load(p)) is not None]
    if not found:
        return None
    fig, axes = plt.subplots(1, len(found), figsize=(5.5 * len(found), 4.5), squeeze=False)
    lines = []
    for ax, (path, data) in zip(axes[0], found, strict=True):
        if path.name == "pd_ttft.json":
            labels, medians, minima = in_process_ttft(data)
            ax.set_title(f"in-process engines, medians / minima of {data['repeats']}", fontsize=9)
        else:
            labels, medians, minima = http_ttft(data)
            n = data["single"]["ttft"]["n"]
            ax.set_title(f"over HTTP (`vllm serve`), {n} prompts per path", fontsize=9)
        ttft_panel(ax, labels, medians, minima)
        lines.append(
            "; ".join(filter(None, [f"{path.name}: {origin(data, path)}", load_text(data)]))
        )
    tokens = found[0][1]["prompt_tokens"]
    title = f"P/D time to first token, {tokens}-token prompt; {PD_MODEL}"
    return save(fig, title, lines, results / "pd_ttft.png")


def in_process_ttft(data: dict[str, Any]) -> tuple[list[str], list[float], list[float]]:
    """(labels, median ms, min ms) of `pd_ttft_bench.py`'s samples; TTFT = prefill + decode."""
    runs = {"single engine": [s * 1e3 for s in data["single_s"]]}
    for name, s in data["variants"].items():
        ttft = [(p + d) * 1e3 for p, d in zip(s["prefill"], s["decode"], strict=True)]
        runs[IN_PROCESS.get(name, name)] = ttft
    return (
        list(runs),
        [statistics.median(v) for v in runs.values()],
        [min(v) for v in runs.values()],
    )


def http_ttft(data: dict[str, Any]) -> tuple[list[str], list[float], list[float]]:
    """(labels, median ms, min ms) of `pd_http_ttft.py`'s summary."""
    paths = [p for p in HTTP if p in data]
    return (
        [HTTP[p] for p in paths],
        [data[p]["ttft"]["median_ms"] for p in paths],
        [data[p]["ttft"]["min_ms"] for p in paths],
    )


def size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def copy_series(
    rows: list[dict[str, Any]],
) -> tuple[list[tuple[int, int, int]], dict[str, list[float | None]]]:
    """(block bytes, layers, blocks) groups in run order, and per id pattern the compiled path's
    % of one contiguous copy (process CPU time) for each group; NaN where a pattern is missing."""
    percent = {
        (r["block"], r["layers"], r["blocks"], r["pattern"]): round(r["memmove_cpu"] * 100)
        for r in rows
    }
    groups = list(dict.fromkeys(key[:3] for key in percent))
    series: dict[str, list[float | None]] = {
        f"{pattern} ids": [percent.get((*g, pattern), math.nan) for g in groups]
        for pattern in ("contiguous", "scattered")
    }
    return groups, series


def plot_block_copy(results: Path) -> Path | None:
    """`block_copy.png`: compiled path, % of one contiguous copy (CPU time), hot and cold."""
    found = [
        (p, d)
        for p in (results / "block_copy_hot.json", results / "block_copy_cold.json")
        if (d := load(p)) is not None
    ]
    if not found:
        return None
    fig, axes = plt.subplots(len(found), 1, figsize=(15, 4.2 * len(found)), squeeze=False)
    lines = []
    for ax, (path, data) in zip(axes[:, 0], found, strict=True):
        groups, series = copy_series(data["rows"])
        labels = [f"{size(b)}\n{lay} layers\n{n} blk" for b, lay, n in groups]
        ax.axhline(COPY_GOAL, color="C3", ls="--", lw=1, label=f"goal: {COPY_GOAL:.0f}%")
        grouped_bars(ax, labels, series, "% of one contiguous copy (process CPU time)")
        ax.tick_params(axis="x", labelsize=7)
        settings = data["settings"]
        ax.set_title(f"{settings['caches']} caches", fontsize=9)
        ax.set_xlabel("bytes per block (all layers) x blocks per batch")
        lines.append(
            f"{settings['caches']}: {origin(data, path)}; medians of {settings['repeats']}; "
            f"{load_text(data)}"
        )
    torch = found[0][1].get("versions", {}).get("torch", "?")
    title = (
        "Block copies: compiled `BlockCopier` path vs one contiguous torch copy_ of the same "
        f"bytes (100% = as fast); torch {torch}, 1 thread"
    )
    return save(fig, title, lines, results / "block_copy.png")


def mark(ax: Axes, x: float, y: float, style: str, label: str | None, right: bool) -> None:
    """One large marker with its value printed beside it (left or right)."""
    ax.plot(x, y, style, ms=8, label=label)
    offset = (8, 0) if right else (-36, 0)
    ax.annotate(f"{y:.3f}", (x, y), xytext=offset, textcoords="offset points", fontsize=8)


def ratio_panel(ax: Axes, engines: dict[str, dict[str, Any]]) -> None:
    """Offload / local per engine: medians as large marks, each repetition's wall ratio as a
    dot; CPU only where it covers the whole engine (uni executor)."""
    for i, r in enumerate(engines.values()):
        first = i == 0
        s = r["samples"]
        reps = [o["wall_s"] / lo["wall_s"] for o, lo in zip(s["offload"], s["local"], strict=True)]
        shown = [min(max(x, RATIO_RANGE[0]), RATIO_RANGE[1]) for x in reps]
        ax.plot([i - 0.12] * len(reps), shown, "k.", ms=4, alpha=0.4)
        off = sorted(x for x, y in zip(reps, shown, strict=True) if x != y)
        if off:
            text = f"{len(off)} reps off scale ({off[0]:.2f}-{off[-1]:.2f}), drawn at the edge"
            edge = (i - 0.12, shown[reps.index(off[0])])
            ax.annotate(text, edge, xytext=(6, 4), textcoords="offset points", fontsize=7)
        mark(
            ax, i - 0.12, r["ratio_wall"], "C0o", "wall (dots: each rep)" if first else None, False
        )
        if r.get("cpu_scope") == "whole engine":
            mark(ax, i + 0.12, r["ratio_cpu"], "C1s", "CPU", True)
        else:
            ax.annotate("CPU: n/a\n(front end only)", (i + 0.08, 0.8), fontsize=7, va="center")
    ax.axhline(1.0, color="0.6", lw=0.8)
    ax.axhline(HIT_GOAL, color="C3", ls="--", lw=1, label=f"goal: <= {HIT_GOAL}")
    ax.set_xticks(range(len(engines)), list(engines))
    ax.set_xlim(-0.6, len(engines) - 0.4)
    ax.set_ylim(RATIO_RANGE[0] - 0.05, RATIO_RANGE[1] + 0.05)
    ax.set_ylabel("offload / local (time ratio, medians)")
    ax.set_xlabel("engine, executor")
    ax.set_title("pass 2: offload hit / local prefix-cache hit", fontsize=9)
    ax.legend(fontsize=7)


def plot_offload_hit(results: Path) -> Path | None:
    """`offload_hit.png`: pass 2 offload / local per executor, and the pass-2 times."""
    path = results / "offload_hit.json"
    data = load(path)
    if data is None:
        return None
    engines = data["engines"]
    offload = [name for name in engines if name.startswith("offload")]
    fig, (ratio_ax, time_ax) = plt.subplots(1, 2, figsize=(11, 4.5))
    ratio_panel(ratio_ax, {name: engines[name] for name in offload})
    times: dict[str, list[float | None]] = {
        f"{hit} hit": [engines[e][hit]["wall_s"] * 1e3 for e in offload]
        for hit in ("local", "offload")
    }
    grouped_bars(time_ax, offload, times, "pass 2 wall time (ms)")
    time_ax.set_title("pass 2 wall time, medians", fontsize=9)
    time_ax.set_xlabel("engine, executor")
    settings = data["settings"]
    title = (
        f"Offload hit vs local prefix-cache hit (engine); {settings['model']}\n"
        f"{settings['prompts']} prompts ({settings['prefixes']} prefixes x "
        f"{settings['prefix_tokens']} tokens + {settings['suffix_tokens']}), max_tokens=1, "
        f"medians of {settings['repeats']}"
    )
    vllm = data.get("versions", {}).get("vllm", "?")
    return save(
        fig,
        title,
        [f"{origin(data, path)}; vLLM {vllm}; {load_text(data)}"],
        results / "offload_hit.png",
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_cli.parser(__doc__)
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the JSON files")
    args = parser.parse_args(argv)
    if plt is None:
        raise SystemExit("matplotlib is missing: pip install 'vam[bench]'")
    for plot in (plot_pd_ttft, plot_block_copy, plot_offload_hit):
        written = plot(args.results)
        if written is not None:
            print(written)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
