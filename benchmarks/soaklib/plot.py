"""Plot a soak run's JSON: request rate, errors, TTFT p50/p99 and prefix hit rate over time,
each fault's window shaded (from its start to its end, one colour per track).

Needs matplotlib (`pip install -e '.[bench]'`); standard library otherwise, so any interpreter
with matplotlib can draw a JSON another one wrote:

    python benchmarks/soaklib/plot.py benchmarks/results/soak/soak.json soak.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["plot"]

_COLOURS = {"pd": "tab:orange", "pool": "tab:purple", "layerwise": "tab:green"}


def plot(summary: dict[str, Any], out: Path) -> Path:
    """Draw `summary` (the soak's JSON) into `out` (PNG); returns `out`.

    Raises:
        ImportError: matplotlib is not installed.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["series"]
    t = [r["t"] / 60 for r in rows]
    fig, axes = plt.subplots(4, 1, figsize=(11, 10), sharex=True)
    panels = [
        ("completions / s", [("rate", "ok", "tab:blue")]),
        ("errors / bucket", [("errors", "failed, hung or wrong", "tab:red")]),
        ("TTFT (s)", [("ttft_p50", "p50", "tab:green"), ("ttft_p99", "p99", "tab:olive")]),
        ("prefix hit rate", [("hit_rate", "local + connector", "tab:cyan")]),
    ]
    for ax, (label, lines) in zip(axes, panels, strict=True):
        for key, name, colour in lines:
            ax.plot(t, [r[key] if r[key] is not None else float("nan") for r in rows],
                    label=name, color=colour)  # fmt: skip
        ax.set_ylabel(label)
        ax.legend(loc="upper right", fontsize=8)
        for fault in summary["faults"]:
            ax.axvspan(fault["start"] / 60, max(fault["ready"], fault["start"] + 1) / 60,
                       color=_COLOURS.get(fault["track"], "grey"), alpha=0.2)  # fmt: skip
    axes[1].set_yscale("symlog")
    for fault in summary["faults"]:
        axes[0].annotate(fault["kind"], (fault["start"] / 60, 0), rotation=90, fontsize=6,
                         va="bottom", xycoords=("data", "axes fraction"))  # fmt: skip
    axes[-1].set_xlabel("minutes (shaded: fault windows; orange P/D, purple pool, green layerwise)")
    fig.suptitle(_title(summary))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _title(summary: dict[str, Any]) -> str:
    return (
        f"soak: {summary['requests_ok']} ok, {summary['requests_failed']} failed, "
        f"{summary['hung']} hung, {summary['wrong_tokens']} wrong, "
        f"{summary['leaked_blocks']} leaked blocks, {len(summary['faults'])} faults"
    )


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py SOAK_JSON OUT_PNG")
    data = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    print(plot(data, Path(sys.argv[2])))
