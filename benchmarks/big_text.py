"""`vam migrate` on one large log with a single stale reference, against `grep` on it.

    PYTHONPATH=.:subsystem python benchmarks/big_text.py --mb 200

Writes a log of about `--mb` MB (vLLM-like lines, one of them naming a moved module) to
`--dir`, then runs `grep -c vllm_ascend` and `vam migrate` on it, each in a fresh process,
and prints wall seconds and peak resident memory (the child's `ru_maxrss`) for each, and
whether migrate made its one edit. Needs nothing but this repository; the file is deleted.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench_cli import parser

OLD = "vllm_ascend.distributed.mooncake_connector.MooncakeConnector"
NEW = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector.MooncakeConnector"
_LINE = (
    "INFO 12-02 05:{m:02d}:{s:02d} [engine.py:{n}] Avg prompt throughput: {n}.3 tokens/s, "
    "Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.{s}%, vllm 0.13.0\n"
)


def write_log(path: Path, megabytes: int) -> None:
    """About `megabytes` MB of log lines, one of them (in the middle) naming `OLD`."""
    block = "".join(_LINE.format(m=i % 60, s=i * 7 % 60, n=i) for i in range(2000)).encode()
    count = max(1, megabytes * 1_000_000 // len(block))
    with open(path, "wb") as out:
        for index in range(count):
            out.write(block)
            if index == count // 2:
                out.write(f"INFO connector={OLD} loaded\n".encode())


def _measure(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of `argv` run to completion in a fresh child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of the children is the largest of any child so far: run the big one last.
    return wall, max(peak, before) / 1024


def main() -> int:
    args = parser(__doc__)
    args.add_argument("--mb", type=int, default=200, help="size of the log, MB")
    args.add_argument("--dir", default="/tmp", help="where the log is written")
    opts = args.parse_args()
    path = Path(opts.dir) / f"vam-big-{os.getpid()}.log"
    try:
        write_log(path, opts.mb)
        size = path.stat().st_size / 1e6
        grep = _measure(["grep", "-c", "vllm_ascend", str(path)])
        vam = _measure([sys.executable, "-m", "migrator", "migrate", str(path)])
        edited = NEW.encode() in path.read_bytes()
        print(f"log: {size:.0f} MB, one reference")
        print(f"grep -c:     {grep[0]:7.2f} s  peak RSS {grep[1]:7.0f} MB")
        print(f"vam migrate: {vam[0]:7.2f} s  peak RSS {vam[1]:7.0f} MB  (edited: {edited})")
    finally:
        path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
