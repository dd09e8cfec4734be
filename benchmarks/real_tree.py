"""Acceptance on real input: migrate the vllm-ascend 0.13.0 sdist and compare with 0.14.0rc1.

    python benchmarks/real_tree.py [--rename-baseline] [--json OUT]

Reports: references rewritten by kind; `vam check` findings left (must be 0);
`python -m compileall -q` on the migrated tree (must pass); and, for files present in both
releases, agreement of the migrated references with the ones 0.14.0rc1 itself changed.
With --rename-baseline it also times ONE run of libcst's RenameCommand on the same tree.

A "reference" for the comparison is every dotted or slashed name under a `new` name of the
table (plus `module.name` for each from-import name), counted per file. The references
0.14.0rc1 changed are those it holds that the 0.13.0 file did not; a migrated file agrees on
each of them that it holds too.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sdists import sdist  # noqa: E402

import rules  # noqa: E402

_REF = None
WINDOW = ("--from", "0.13.0", "--to", "0.14.0")


def vam(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "migrator", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def targets(steps: tuple[rules.Step, ...] | None = None) -> list[str]:
    """Every `new` (and symbol's new module) of `steps` (default: the 0.14.0 step)."""
    pack = rules.load_pack("vllm_ascend")
    names = set()
    for step in steps or (pack.step("0.14.0"),):
        for move in (*step.modules, *step.symbols):
            names.add(move.new)
        names.update(s.new_module for s in step.symbols)
    return sorted(names)


def references(text: str, names: list[str], python: bool) -> Counter[str]:
    """Dotted/slashed names under any of `names` in `text`, with from-import names joined."""
    import re

    found: Counter[str] = Counter()
    pattern = re.compile(r"(?<![A-Za-z0-9_.])vllm_ascend(?:[./][A-Za-z_][A-Za-z0-9_]*)+")
    for match in pattern.finditer(text):
        dotted = match.group().replace("/", ".")
        if _under_any(dotted, names):
            found[dotted] += 1
    if python:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return found
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if _under_any(full, names) and not _under_any(node.module, names):
                        found[full] += 1
    return found


def _under_any(dotted: str, names: list[str]) -> bool:
    return any(dotted == n or dotted.startswith(n + ".") for n in names)


def agreement(
    old_tree: Path, migrated: Path, new_tree: Path, names: list[str] | None = None
) -> dict[str, object]:
    """Per file present in both releases: the references under `names` (default:
    `targets()`) that `new_tree` changed, and how many of them the migration made too."""
    names = targets() if names is None else names
    changed_total = agreed = 0
    missing: list[tuple[str, str, int]] = []
    extra: list[tuple[str, str, int]] = []
    files = 0
    for path in sorted(old_tree.rglob("*")):
        rel = path.relative_to(old_tree)
        other = new_tree / rel
        if (
            not path.is_file()
            or not other.is_file()
            or "egg-info" in str(rel)
            or rel.name == "PKG-INFO"
        ):
            continue
        try:
            before_text = path.read_text(encoding="utf-8-sig")
            after_text = (migrated / rel).read_text(encoding="utf-8-sig")
            upstream_text = other.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError:
            continue
        python = path.suffix == ".py"
        before = references(before_text, names, python)
        ours = references(after_text, names, python) - before
        theirs = references(upstream_text, names, python) - before
        if not theirs and not ours:
            continue
        files += 1
        changed_total += sum(theirs.values())
        agreed += sum((theirs & ours).values())
        for name, count in (theirs - ours).items():
            missing.append((str(rel), name, count))
        for name, count in (ours - theirs).items():
            extra.append((str(rel), name, count))
    return {
        "files_compared": files,
        "references_changed_by_0.14.0rc1": changed_total,
        "agreed": agreed,
        "agreement": agreed / changed_total if changed_total else 1.0,
        "in_0.14.0rc1_not_in_migrated": missing,
        "in_migrated_not_in_0.14.0rc1": extra,
    }


def rename_baseline(tree: Path) -> float:
    """Seconds for ONE libcst RenameCommand run (one name) over the same tree."""
    work = Path(tempfile.mkdtemp(prefix="vam-rename-"))
    try:
        copy = work / "tree"
        shutil.copytree(tree, copy)
        subprocess.run(
            [sys.executable, "-m", "libcst.tool", "initialize", "."],
            cwd=work,
            capture_output=True,
            check=True,
        )
        start = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "libcst.tool",
                "codemod",
                "--no-format",
                "--hide-progress",
                "rename.RenameCommand",
                "--old_name",
                "vllm_ascend.distributed.mooncake_connector",
                "--new_name",
                "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector",
                "tree",
            ],
            cwd=work,
            capture_output=True,
            check=False,
        )
        return time.perf_counter() - start
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rename-baseline",
        action="store_true",
        help="also time one libcst RenameCommand run (about a minute)",
    )
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()

    old_tree, new_tree = sdist("0.13.0"), sdist("0.14.0rc1")
    work = Path(tempfile.mkdtemp(prefix="vam-real-"))
    try:
        migrated = work / old_tree.name
        shutil.copytree(old_tree, migrated)
        before = json.loads(
            vam("check", "--format", "json", *WINDOW, migrated.name, cwd=work).stdout
        )
        kinds = Counter(f["kind"] for f in before if f["code"] == "VAM001")
        start = time.perf_counter()
        # The table goes on past 0.14; this benchmark is the 0.13.0 -> 0.14.0rc1 pair
        # (benchmarks/history.py runs every pair and the whole path).
        run = vam("migrate", "--quiet", *WINDOW, migrated.name, cwd=work)
        migrate_s = time.perf_counter() - start
        after = json.loads(
            vam("check", "--format", "json", *WINDOW, migrated.name, cwd=work).stdout
        )
        compiled = subprocess.run(
            [sys.executable, "-m", "compileall", "-q", migrated.name],
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )
        report: dict[str, object] = {
            "migrate_exit": run.returncode,
            "migrate_seconds": round(migrate_s, 3),
            "references_rewritten_by_kind": dict(kinds.most_common()),
            "references_rewritten": sum(kinds.values()),
            "check_findings_left": len(after),
            "check_findings_left_detail": after[:20],
            "compileall_ok": compiled.returncode == 0,
            "compileall_output": compiled.stdout[-2000:] + compiled.stderr[-2000:],
        }
        report.update(agreement(old_tree, migrated, new_tree))
        if args.rename_baseline:
            rename_s = rename_baseline(old_tree)
            report["rename_command_seconds"] = round(rename_s, 3)
            report["speedup_vs_rename_command"] = round(rename_s / migrate_s, 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    ok = (
        report["check_findings_left"] == 0
        and report["compileall_ok"]
        and float(report["agreement"]) >= 0.99
    )  # type: ignore[arg-type]
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
