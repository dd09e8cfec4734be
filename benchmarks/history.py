"""Real input, every release: migrate each vllm-ascend sdist to the next release that moved
something, and the oldest one along the whole history.

    python benchmarks/history.py [--json OUT] [--markdown]
    python benchmarks/history.py --infer [--pair NEW ...] [--json OUT] [--markdown]

With `--infer`: `vam rules infer` against the pack's step on every consecutive pair of the
whole history instead (benchmarks/infer_agreement.py says how entries are compared).

Per consecutive pair (A, B) with a step of the bundled table in between: `vam migrate --from
A --to B` on a copy of A's sdist; references rewritten by kind; `vam check --from A --to B`
findings left (must be 0); `python -m compileall -q` (must pass); agreement with B's sdist on
files present in both (>= 99% of the references B changed, see benchmarks/real_tree.py), with
every disagreement listed; and rewrites of a reference B kept although it still exists in B
(must be 0: an old path B kept that exists nowhere in B is B's stale reference, listed apart).

Whole path: `vam migrate --from 0.13.0` (no --to: every step) on the 0.13.0 sdist; every
reference it rewrote must name a module or object of the newest release's tree (removed names
are reported, never rewritten); its run time is compared with the single step (--to 0.14.0)
on the same tree.
"""

from __future__ import annotations

import argparse
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
from real_tree import agreement, references, targets, vam  # noqa: E402
from sdists import sdist  # noqa: E402

import rules  # noqa: E402
from migrator.core.resolver import Resolver  # noqa: E402
from migrator.core.tables import name_exists  # noqa: E402

RELEASES = (
    "0.13.0 0.14.0rc1 0.15.0rc1 0.16.0rc1 0.17.0rc1 0.18.0rc1 0.18.0 0.19.1rc1 0.20.2rc1 "
    "0.21.0rc1 0.22.1rc1 0.23.0rc1 0.23.0 0.23.0.post1 0.24.0rc1 0.25.1rc1 0.26.0rc1 "
    "0.27.1rc1 0.28.0rc1 0.29.0rc1 0.30.0rc1 0.30.0rc2"
).split()
# The table's first step is named for the final 0.14.0 release; 0.14.0rc1 is its sdist.
STEP_OF = {"0.14.0rc1": "0.14.0"}
PACK = rules.load_pack("vllm_ascend")


def window(old: str, new: str) -> tuple[str, str]:
    return STEP_OF.get(old, old), STEP_OF.get(new, new)


def run_pair(old: str, new: str, work: Path) -> dict[str, object]:
    low, high = window(old, new)
    steps = Resolver(PACK, low, high).steps
    old_tree, new_tree = sdist(old), sdist(new)
    migrated = work / f"{old_tree.name}-to-{new}"
    shutil.copytree(old_tree, migrated)
    flags = ("--from", low, "--to", high)
    before = json.loads(vam("check", "--format", "json", *flags, migrated.name, cwd=work).stdout)
    start = time.perf_counter()
    run = vam("migrate", "--quiet", *flags, migrated.name, cwd=work)
    seconds = time.perf_counter() - start
    after = json.loads(vam("check", "--format", "json", *flags, migrated.name, cwd=work).stdout)
    compiled = subprocess.run(
        [sys.executable, "-m", "compileall", "-q", migrated.name],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    kinds = Counter(f["kind"] for f in before if f["code"] == "VAM001")
    report: dict[str, object] = {
        "pair": f"{old} -> {new}",
        "steps": [s.version for s in steps],
        "migrate_exit": run.returncode,
        "migrate_seconds": round(seconds, 3),
        "rewritten_by_kind": dict(kinds.most_common()),
        "rewritten": sum(kinds.values()),
        "removed_reported": sum(f["code"] == "VAM003" for f in before),
        "check_findings_left": sum(f["code"] == "VAM001" for f in after),
        "compileall_ok": compiled.returncode == 0,
    }
    found = agreement(old_tree, migrated, new_tree, targets(steps))
    report["files_compared"] = found["files_compared"]
    new_code, missed = split_new_code(old_tree, steps, found["in_0.14.0rc1_not_in_migrated"])
    changed = int(found["references_changed_by_0.14.0rc1"]) - sum(c for _, _, c in new_code)
    report["changed_by_new_release"] = changed
    report["agreed"] = found["agreed"]
    report["agreement"] = int(found["agreed"]) / changed if changed else 1.0  # type: ignore[call-overload]
    report["new_code_in_new_release"] = new_code
    report["in_new_release_not_migrated"] = missed
    report.update(kept_rewrites(old_tree, migrated, new_tree, steps))
    shutil.rmtree(migrated, ignore_errors=True)
    return report


def split_new_code(
    old_tree: Path, steps: tuple[rules.Step, ...], missing: object
) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]]]:
    """B's new references that A's file never held in their old form (code B added, not a
    reference B migrated), apart from the references vam really missed."""
    new_code, missed = [], []
    for rel, name, count in missing:  # type: ignore[attr-defined]
        olds = [
            rule.old + name[len(rule.new) :]
            for step in steps
            for rule in step.moves()
            if name == rule.new or name.startswith(rule.new + ".")
        ]
        text = (old_tree / rel).read_text(encoding="utf-8-sig", errors="replace")
        held = any(old in text or old.replace(".", "/") in text for old in olds)
        (missed if held else new_code).append((rel, name, count))
    return new_code, missed


def kept_rewrites(
    old_tree: Path, migrated: Path, new_tree: Path, steps: tuple[rules.Step, ...]
) -> dict[str, object]:
    """References to an old name that A and B both hold, per file, which the migration
    rewrote: wrong when the name still exists in B, B's stale path when it does not."""
    olds = sorted({old for step in steps for old, _ in step.olds()})
    wrong: list[tuple[str, str]] = []
    stale: Counter[str] = Counter()
    for path in sorted(old_tree.rglob("*")):
        rel = path.relative_to(old_tree)
        other, ours = new_tree / rel, migrated / rel
        if not path.is_file() or not other.is_file() or "egg-info" in str(rel):
            continue
        try:
            texts = [p.read_text(encoding="utf-8-sig") for p in (path, other, ours)]
        except UnicodeDecodeError:
            continue
        python = path.suffix == ".py"
        a, b, m = (references(t, olds, python) for t in texts)
        for name in (a & b) - m:
            if name_exists(new_tree, name):
                wrong.append((str(rel), name))
            else:
                stale[name] += 1
    return {"rewrites_of_kept_references": wrong, "stale_paths_new_release_kept": dict(stale)}


def whole_path(work: Path) -> dict[str, object]:
    """0.13.0 along every step; each rewritten reference checked against the newest tree."""
    old_tree, newest = sdist(RELEASES[0]), sdist(RELEASES[-1])
    times: dict[str, float] = {}
    kept: dict[str, Path] = {}
    for label, flags in (("single_step", ("--to", "0.14.0")), ("whole_path", ())):
        best = float("inf")
        for attempt in range(3):  # best of 3: the machine is shared
            copy = work / f"{label}-{attempt}"
            shutil.copytree(old_tree, copy)
            start = time.perf_counter()
            vam("migrate", "--quiet", "--from", RELEASES[0], *flags, copy.name, cwd=work)
            best = min(best, time.perf_counter() - start)
            kept[label] = copy
        times[label] = best
    migrated = kept["whole_path"]
    names = targets(PACK.steps)
    rewritten: Counter[str] = Counter()
    for path in sorted(old_tree.rglob("*")):
        rel = path.relative_to(old_tree)
        if not path.is_file() or "egg-info" in str(rel):
            continue
        try:
            before = path.read_text(encoding="utf-8-sig")
            after = (migrated / rel).read_text(encoding="utf-8-sig")
        except UnicodeDecodeError:
            continue
        python = path.suffix == ".py"
        rewritten += references(after, names, python) - references(before, names, python)
    nowhere = sorted(n for n in rewritten if not name_exists(newest, n))
    check = vam("check", "--format", "json", "--from", RELEASES[0], migrated.name, cwd=work)
    left = json.loads(check.stdout)
    return {
        "references_rewritten": sum(rewritten.values()),
        "distinct_names_rewritten": len(rewritten),
        "names_not_in_newest_tree": nowhere,
        "removed_reported": sum(f["code"] == "VAM003" for f in left),
        "check_findings_left": sum(f["code"] == "VAM001" for f in left),
        "single_step_seconds": round(times["single_step"], 3),
        "whole_path_seconds": round(times["whole_path"], 3),
        "ratio": round(times["whole_path"] / times["single_step"], 2),
    }


def markdown(pairs: list[dict[str, object]], whole: dict[str, object]) -> str:
    head = (
        "| pair | steps | rewritten (by kind) | removed reported | check left | compileall "
        "| agreement with B | kept refs rewritten |\n|---|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for r in pairs:
        kinds = ", ".join(f"{k} {v}" for k, v in r["rewritten_by_kind"].items())  # type: ignore[attr-defined]
        rows.append(
            f"| {r['pair']} | {', '.join(r['steps'])} | {r['rewritten']} ({kinds or '-'}) "  # type: ignore[arg-type]
            f"| {r['removed_reported']} | {r['check_findings_left']} "
            f"| {'passes' if r['compileall_ok'] else 'FAILS'} "
            f"| {r['agreed']} of {r['changed_by_new_release']} ({float(r['agreement']):.0%}; "  # type: ignore[arg-type]
            f"{sum(c for _, _, c in r['new_code_in_new_release'])} new in B) "  # type: ignore[attr-defined]
            f"| {len(r['rewrites_of_kept_references'])} |"  # type: ignore[arg-type]
        )
    return "\n".join(rows) + "\n\nwhole path: " + json.dumps(whole)


def infer_report(out: Path | None, table: bool, only: list[str] | None) -> int:
    """Infer's agreement per pair; exit 1 when more than one entry in ten differs, or a
    differing entry has no comment in the pack."""
    import infer_agreement

    results = infer_agreement.run_all(only)
    total = infer_agreement.totals(results)
    text = json.dumps({"pairs": [r.row() for r in results], "total": total}, indent=2)
    print(text)
    if table:
        print(infer_agreement.markdown(results))
    if out:
        out.write_text(text + "\n")
    ok = (
        total["differing"] == total["differing_commented"]
        and total["differing"] * 10 <= total["entries"]
    )
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    parser.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    parser.add_argument(
        "--infer", action="store_true", help="infer's agreement with the pack, every pair"
    )
    parser.add_argument(
        "--pair", action="append", metavar="NEW", help="with --infer: only the pair ending at NEW"
    )
    args = parser.parse_args()
    if args.infer:
        return infer_report(args.json, args.markdown, args.pair)
    work = Path(tempfile.mkdtemp(prefix="vam-history-"))
    try:
        pairs = []
        for old, new in zip(RELEASES, RELEASES[1:], strict=False):
            if Resolver(PACK, *window(old, new)).steps:
                pairs.append(run_pair(old, new, work))
        whole = whole_path(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {"pairs": pairs, "whole_path": whole}
    text = json.dumps(report, indent=2)
    print(text)
    if args.markdown:
        print(markdown(pairs, whole))
    if args.json:
        args.json.write_text(text + "\n")
    ok = (
        all(
            p["check_findings_left"] == 0
            and p["compileall_ok"]
            and float(p["agreement"]) >= 0.99  # type: ignore[arg-type]
            and not p["rewrites_of_kept_references"]
            for p in pairs
        )
        and not whole["names_not_in_newest_tree"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
