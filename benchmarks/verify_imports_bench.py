"""Time `vam verify-imports` static mode: a generated 1,000-module tree and the real sdists.

    python benchmarks/verify_imports_bench.py [--modules N] [--repeat R] [--pylint PYLINT]
                                              [--json OUT]

1. Generates a package of N modules (default 1,000; 20 subpackages) of about the size of
   vllm-ascend's (~9 KB, ~250 lines: classes, methods, docstrings) with absolute, relative, star,
   TYPE_CHECKING and function-level imports and a few import cycles, then times static mode on
   it (median of R in-process runs) and reports modules per second.
   Also times the cycle replay's worst case: a ring of N modules importing each other.
2. Runs static mode on the vllm-ascend 0.14.0rc1 and 0.13.0 sdists (benchmarks/sdists.py
   fetches them into a cache outside the repository) and lists the findings.
3. With --pylint PATH (pylint installed in a scratch venv, never in the project's): runs
   `pylint --disable=all --enable=E0401,E0611` on the same 0.14.0rc1 tree once, times it and
   splits its findings into first-party (vllm_ascend) and third-party modules.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sdists import sdist  # noqa: E402

from migrator.verify_imports import render, verify_static  # noqa: E402

SUBPACKAGES = 20

_BODY = '''

class {cls}:
    """A connector-sized class: a few methods with real bodies, so parsing costs what it does
    on real code."""

    def __init__(self, config, block_size: int = 16) -> None:
        self.config = config
        self.block_size = block_size
        self.blocks: dict[int, list[int]] = {{}}

    def lookup(self, block_hashes: list[int]) -> int:
        hits = 0
        for block_hash in block_hashes:
            if block_hash in self.blocks:
                hits += 1
            else:
                break
        return hits * self.block_size

    def load(self, request_id: str, block_ids: list[int]) -> list[int]:
        missing = [b for b in block_ids if b not in self.blocks]
        if missing:
            raise KeyError(f"{{request_id}}: {{len(missing)}} blocks missing")
        return [x for b in block_ids for x in self.blocks[b]]


def {func}(values: list[int], scale: float = 1.0) -> list[float]:
    """Scale and clip."""
    out = []
    for value in values:
        scaled = value * scale
        out.append(min(max(scaled, -1e9), 1e9))
    return out
'''


def generate(root: Path, modules: int, seed: int = 0) -> int:
    """Write a clean package `gen` of about `modules` modules under `root` (the count written
    is returned): every import resolves and every import order works, as in a healthy tree."""
    rng = random.Random(seed)
    leaves = max(2 * SUBPACKAGES, modules - 1 - SUBPACKAGES)
    per_sub = -(-leaves // SUBPACKAGES)
    names = [(s, m) for s in range(SUBPACKAGES) for m in range(per_sub)][:leaves]
    (root / "gen").mkdir(parents=True)
    (root / "gen" / "__init__.py").write_text('"""Generated."""\nVERSION = "1"\n')
    written = 1
    for s in range(SUBPACKAGES):
        sub = root / "gen" / f"sub{s}"
        sub.mkdir()
        # Each subpackage re-exports its first module, as real packages do.
        (sub / "__init__.py").write_text("from .mod0 import *  # noqa: F403\nfrom . import mod1\n")
        written += 1
    for s, m in names:
        lines = [
            "from __future__ import annotations",
            "",
            "import os",
            "from typing import TYPE_CHECKING",
            "",
            "from gen import VERSION",
        ]
        for _ in range(6):  # names from modules that come earlier: no cycle through them
            ts, tm = rng.choice(names)
            if (ts, tm) < (s, m):
                lines.append(f"from gen.sub{ts}.mod{tm} import Cls{ts}_{tm}, func{ts}_{tm}")
        if m > 0:
            lines.append(f"from .mod{m - 1} import Cls{s}_{m - 1}")
        if s > 0:
            lines.append(f"from .. import sub{s - 1}")
            lines.append(f"from ..sub{s - 1} import Cls{s - 1}_0")  # via the star re-export
        lines += [
            "if TYPE_CHECKING:",
            f"    from gen.sub{(s + 1) % SUBPACKAGES}.mod0 import Cls{(s + 1) % SUBPACKAGES}_0",
            "",
        ]
        lines += [
            "",
            "def lazy():",
            f"    from gen.sub{(s + 3) % SUBPACKAGES} import mod1",
            "    return mod1",
            "",
        ]
        body = "\n".join(lines) + _BODY.format(cls=f"Cls{s}_{m}", func=f"func{s}_{m}")
        body += "".join(_BODY.format(cls=f"Helper{k}", func=f"helper{k}") for k in range(6))
        if m % 10 == 3 and (s, m + 1) in names:
            # A cycle that never breaks: module-object imports at the end, both ways.
            body += f"\n\nimport gen.sub{s}.mod{m + 1}  # noqa: E402\n"
        if m % 10 == 4:
            body += f"\n\nimport gen.sub{s}.mod{m - 1}  # noqa: E402\n"
        (root / "gen" / f"sub{s}" / f"mod{m}.py").write_text(body)
        written += 1
    return written


def generate_ring(root: Path, modules: int) -> None:
    """The cycle replay's worst case: `ring` of `modules` modules that import each other in one
    big cycle (one component, every member a different first entry, each replay visits all)."""
    (root / "ring").mkdir(parents=True)
    (root / "ring" / "__init__.py").write_text("")
    for i in range(modules):
        (root / "ring" / f"m{i}.py").write_text(
            f"import ring.m{(i + 1) % modules}\nX{i} = 1\n"
            f"from ring.m{(i + 7) % modules} import X{(i + 7) % modules}\n"
        )


def imports_cleanly(root: Path) -> bool:
    """Ground truth for the generated tree: importing every module works in Python."""
    code = (
        "import pkgutil, importlib, gen\n"
        "for m in pkgutil.walk_packages(gen.__path__, 'gen.'):\n"
        "    importlib.import_module(m.name)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        capture_output=True,
        check=False,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
    )
    return done.returncode == 0


def time_static(target: Path, repeat: int) -> dict[str, object]:
    """Median wall and CPU seconds of `repeat` in-process static runs on `target` (CPU time is
    what to compare on a shared machine: other processes inflate wall time, not CPU time)."""
    cwd = os.getcwd()
    os.chdir(target.parent)
    try:
        wall, cpu = [], []
        for _ in range(repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            result = verify_static([target.name])
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    finally:
        os.chdir(cwd)
    return {
        "files": result.checked,
        "median_wall_seconds": round(statistics.median(wall), 3),
        "median_cpu_seconds": round(statistics.median(cpu), 3),
        "findings": Counter(f.code for f in result.findings),
        "report": render(result.findings, "text").splitlines(),
    }


def run_pylint(pylint: str, version: str) -> dict[str, object]:
    tree = sdist(version)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [pylint, "--disable=all", "--enable=E0401,E0611", "--jobs=1", "vllm_ascend"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    findings = [line for line in done.stdout.splitlines() if re.search(r": E0(401|611): ", line)]
    first_party = [f for f in findings if re.search(r"'vllm_ascend[.']", f)]
    third_party = Counter(
        m.group(1)
        for f in findings
        if f not in first_party
        for m in [re.search(r"(?:import|module) '([A-Za-z0-9_]+)", f)]
        if m
    )
    return {
        "wall_seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3),
        "findings": len(findings),
        "E0401": sum(": E0401: " in f for f in findings),
        "E0611": sum(": E0611: " in f for f in findings),
        "first_party": first_party,
        "third_party_by_top_module": dict(third_party.most_common()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pylint", help="pylint executable for the comparison run")
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="vam-vi-bench-"))
    try:
        count = generate(work, args.modules)
        generated = time_static(work / "gen", args.repeat)
        generated["python_imports_every_module"] = imports_cleanly(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    generated["modules"] = count
    work = Path(tempfile.mkdtemp(prefix="vam-vi-ring-"))
    try:
        generate_ring(work, args.modules)
        ring = time_static(work / "ring", 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ring.pop("report")
    generated["modules_per_cpu_second"] = round(count / generated["median_cpu_seconds"])  # type: ignore[operator]
    report: dict[str, object] = {
        "generated": generated,
        "worst_case_ring": ring,
        "vllm_ascend-0.14.0rc1": time_static(sdist("0.14.0rc1") / "vllm_ascend", args.repeat),
        "vllm_ascend-0.13.0": time_static(sdist("0.13.0") / "vllm_ascend", args.repeat),
    }
    if args.pylint:
        pylint = run_pylint(args.pylint, "0.14.0rc1")
        report["pylint-0.14.0rc1"] = pylint
        ours = report["vllm_ascend-0.14.0rc1"]
        report["pylint_over_vam"] = {
            "wall": round(pylint["wall_seconds"] / ours["median_wall_seconds"], 1),  # type: ignore
            "cpu": round(pylint["cpu_seconds"] / ours["median_cpu_seconds"], 1),  # type: ignore
        }
    text = json.dumps(report, indent=2, default=dict)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
