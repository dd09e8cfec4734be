"""This checkout against an older one, in the same run: `vam migrate` on the vllm-ascend
0.13.0 sdist and `vam check` on the 1.4M-line tree (vLLM's source + the sdist), with ruff's
TID251 beside them.

    git worktree add /tmp/vam-old <rev>
    python -m compileall -q migrator rules /tmp/vam-old/migrator /tmp/vam-old/rules
    python benchmarks/compare_revisions.py /tmp/vam-old [--repeat 7] [--vllm DIR]

Runs alternate (old, new, old, new, ...) so both see the same load; each figure is the
median of --repeat runs, CPU time of the child process tree (user + system) next to wall
time. Both checkouts run with `--to 0.14.0` (the first step of the later history, and the
whole table of the oldest checkouts measured), so both apply the same rules; `check (all
steps)` shows the cost of the whole history.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_vs_ruff import build_tree  # noqa: E402
from sdists import sdist  # noqa: E402

HERE = Path(__file__).resolve().parents[1]
VLLM = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" \
    / "site-packages" / "vllm"


def timed(cmd: list[str], cwd: Path, checkout: Path | None) -> tuple[float, float]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled modules, as an installed wheel has
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="the older checkout (a git worktree)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--vllm", type=Path, default=VLLM, help="vLLM package folder")
    args = parser.parse_args()
    vam = [sys.executable, "-m", "migrator"]
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or "ruff"
    scratch = Path(tempfile.mkdtemp(prefix="vam-compare-"))
    big = scratch / "big"
    build_tree(args.vllm, sdist("0.13.0"), big)
    config = scratch / "ruff.toml"
    # The old checkout's table is the 0.14.0 step alone: the same rules the runs apply.
    config.write_text(subprocess.run(
        [*vam, "rules", "export", "ruff", "--standalone"],
        env={**os.environ, "PYTHONPATH": str(args.old)}, capture_output=True, text=True,
        check=True).stdout)
    runs: dict[str, list[tuple[float, float]]] = {}

    def record(name: str, figures: tuple[float, float]) -> None:
        runs.setdefault(name, []).append(figures)

    same = ["--to", "0.14.0"]
    for _ in range(args.repeat):
        for name, checkout, extra in (("old", args.old, same), ("new", HERE, same)):
            tree = scratch / f"migrate-{name}"
            shutil.copytree(sdist("0.13.0"), tree)
            record(f"migrate {name}", timed([*vam, "migrate", *extra, "-q", str(tree)],
                                            scratch, checkout))
            shutil.rmtree(tree)
            record(f"check {name}", timed([*vam, "check", *extra, "."], big, checkout))
        record("check new (all steps)", timed([*vam, "check", "."], big, HERE))
        record("ruff TID251", timed([ruff, "check", "--no-cache", "--config", str(config), "."],
                                    big, None))
    shutil.rmtree(scratch)
    cpu = {name: statistics.median(c for _, c in values) for name, values in runs.items()}
    for name, values in runs.items():
        wall = statistics.median(w for w, _ in values)
        print(f"{name:24s} wall {wall:6.2f} s   cpu {cpu[name]:6.2f} s")
    print(f"migrate new/old CPU {cpu['migrate new'] / cpu['migrate old']:.2f}; "
          f"check new/old CPU {cpu['check new'] / cpu['check old']:.2f}; "
          f"check new/ruff CPU {cpu['check new'] / cpu['ruff TID251']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
