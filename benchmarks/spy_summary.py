"""Where a process's time goes, from a `py-spy record --format raw` capture (collapsed stacks).

Each sample's stack is put in the first category whose pattern occurs in it (order below: our
connector code first, so that a copy called from vLLM counts as ours), and the shares are
printed with the leaf functions that carry most samples in each category.

    py-spy record --pid PID --duration 20 --rate 200 --format raw --output spy.txt --idle
    python benchmarks/spy_summary.py spy.txt [more.txt ...] [--top 5] [--json PATH]

`--idle` keeps samples of threads that sleep or wait, so a wait in the engine loop shows up.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

CATEGORIES = (
    ("ours: block copies", ("block_copy", "_block_memmove")),
    ("ours: cpu offload (metadata, scheduler, worker)", ("kv_pool/cpu_offload",)),
    ("ours: kv pool (ascend store)", ("kv_pool/ascend_store",)),
    ("ours: P/D connector", ("kv_p2p/",)),
    ("ours: other", ("vllm_ascend/",)),
    ("vLLM shm queue wait (sched_yield)", ("sched_yield", "shm_broadcast")),
    ("model forward (torch, model code)", ("model_executor/models", "torch/nn/", "onednn")),
    ("vLLM scheduler and KV cache manager", ("v1/core/",)),
    ("vLLM output processing / API server", ("entrypoints/", "output_processor", "detokenizer")),
    ("idle: poll, select, queue, sleep", ("select", "poll (", "wait (threading", "sleep", "recv")),
)


def categorise(stack: str) -> str:
    """The category of one collapsed stack."""
    for name, patterns in CATEGORIES:
        if any(p in stack for p in patterns):
            return name
    return "other"


def summarise(paths: list[Path], top: int, main_only: bool = False) -> dict[str, dict[str, object]]:
    """{category: {"samples", "share", "top": [[leaf, samples], ...]}} over all captures;
    `main_only`: only the main thread's samples (stacks not rooted in `Thread._bootstrap`),
    the engine loop's critical path, without server and I/O threads that mostly wait."""
    per_category: Counter[str] = Counter()
    leaves: dict[str, Counter[str]] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            if main_only and stack.startswith("Thread._bootstrap"):
                continue
            name = categorise(stack)
            per_category[name] += int(count)
            leaves.setdefault(name, Counter())[stack.rsplit(";", 1)[-1].strip()] += int(count)
    total = sum(per_category.values()) or 1
    return {
        name: {
            "samples": n,
            "share": n / total,
            "top": [[leaf, c] for leaf, c in leaves[name].most_common(top)],
        }
        for name, n in per_category.most_common()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("captures", nargs="+", type=Path, help="py-spy raw output files")
    parser.add_argument("--top", type=int, default=3, help="leaf functions per category")
    parser.add_argument("--json", type=Path, help="write the summary here")
    parser.add_argument("--main-thread", action="store_true", help="the main thread only")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.captures if not p.is_file()]
    if missing:
        print(f"spy_summary: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    summary = summarise(args.captures, args.top, args.main_thread)
    for name, entry in summary.items():
        print(f"{entry['share']:6.1%}  {name}")
        for leaf, count in entry["top"]:  # type: ignore[attr-defined]
            print(f"          {count:6d}  {leaf}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
