"""`vam rules infer` against the bundled pack on every consecutive pair of released sdists.

    python benchmarks/history.py --infer [--markdown] [--json OUT]

Pairs: every vllm-ascend release in PEP 440 order, each with the one just before it, which is
how the pack pairs its steps (a stable side branch's release sits where its version puts it:
0.9.1 -> 0.9.2rc1, 0.11.0 -> 0.12.0rc1, 0.13.0rc3 -> 0.13.0, 0.23.0.post1 -> 0.24.0rc1).
Per pair, `infer(OLD, NEW, --package vllm_ascend, --under vllm_ascend.distributed)` in
process, against the pack's step named for NEW (none: no entry shipped).

A row is (kind, old, new), new "" for a removal; hints and submodule lists are not
compared, intermediate rows are out of reach of an sdist pair and left out (counted apart).
Infer's rows are its active ones (commented-out ones are no table entry). An entry is an
`old` that the shipped step or infer has a row for; it agrees when both have the same row,
and differs otherwise (a row on one side only, or another kind or `new`). A differing entry
is a "hand decision" when the pack comments on it: the shipped row is directly preceded by
a comment, or a comment of that step (for a pair without a step, any comment of the pack
naming NEW's version) spells the old name's last component.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sdists import sdist  # noqa: E402

import rules  # noqa: E402
from migrator.core.sources import open_release  # noqa: E402
from migrator.infer import infer  # noqa: E402

# From the last release without vllm_ascend.distributed (0.7.1rc1 to 0.7.3rc2 have none).
RELEASES = (
    "0.7.3rc2 0.7.3 0.7.3.post1 0.8.4rc1 0.8.4rc2 0.8.5rc1 0.9.0rc1 0.9.0rc2 "
    "0.9.1rc1 0.9.1rc2 0.9.1rc3 0.9.1 0.9.2rc1 0.10.0rc1 0.10.1rc1 0.10.2rc1 0.11.0rc0 "
    "0.11.0rc1 0.11.0rc2 0.11.0rc3 0.11.0 0.12.0rc1 0.13.0rc1 0.13.0rc2 0.13.0rc3 0.13.0 "
    "0.14.0rc1 0.15.0rc1 0.16.0rc1 0.17.0rc1 0.18.0rc1 0.18.0 0.19.1rc1 0.20.2rc1 0.21.0rc1 "
    "0.22.1rc1 0.23.0rc1 0.23.0 0.23.0.post1 0.24.0rc1 0.25.1rc1 0.26.0rc1 0.27.1rc1 "
    "0.28.0rc1 0.29.0rc1 0.30.0rc1 0.30.0rc2"
).split()
# The pack's first later step is named for the final 0.14.0 release; 0.14.0rc1 is its sdist.
STEP_OF = {"0.14.0rc1": "0.14.0"}
PACK_FILE = Path(__file__).resolve().parents[1] / "rules" / "vllm_ascend.toml"
SCOPE = "vllm_ascend.distributed"

Entry = tuple[str, str, str]


@dataclass
class PairResult:
    """One pair's figures; `differing` lists (entry, side, commented)."""

    old: str
    new: str
    step: str | None
    shipped: set[Entry]
    emitted: set[Entry]
    intermediate: int = 0
    seconds: float = 0.0
    differing: list[tuple[Entry, str, bool]] = field(default_factory=list)

    @property
    def exact(self) -> int:
        return len(self.shipped & self.emitted)

    @property
    def entries(self) -> int:
        return len({e[1] for e in self.shipped | self.emitted})

    @property
    def commented(self) -> int:
        return sum(1 for _, _, c in self.differing if c)

    def row(self) -> dict[str, object]:
        return {
            "pair": f"{self.old} -> {self.new}",
            "step": self.step,
            "shipped": len(self.shipped),
            "emitted": len(self.emitted),
            "entries": self.entries,
            "exact": self.exact,
            "differing": len(self.differing),
            "differing_commented": self.commented,
            "intermediate_left_out": self.intermediate,
            "infer_seconds": round(self.seconds, 2),
            "diff": [
                {"side": side, "kind": e[0], "old": e[1], "new": e[2], "commented": c}
                for e, side, c in self.differing
            ],
        }


def shipped_entries(step: rules.Step) -> tuple[set[Entry], int]:
    """The step's rows as entries, and how many intermediate rows were left out."""
    out: set[Entry] = {("module", m.old, m.new) for m in step.modules if not m.intermediate}
    out |= {("symbol", s.old, s.new) for s in step.symbols}
    out |= {("removed", r.old, "") for r in step.removed}
    return out, sum(1 for m in step.modules if m.intermediate)


def step_comments(text: str, version: str | None, new: str) -> list[str]:
    """The comment lines that speak for the step `version` (the paragraph before its
    `[[step]]` and every comment up to the next step), or, without a step, those naming
    `new`'s version anywhere in the pack."""
    lines = text.splitlines()
    if version is None:
        pattern = re.compile(rf"(?<![\w.]){re.escape(new)}(?![\w])")
        return [line for line in lines if line.startswith("#") and pattern.search(line)]
    starts = [i for i, line in enumerate(lines) if line.strip() == "[[step]]"]
    for n, start in enumerate(starts):
        if lines[start + 1].strip() != f'version = "{version}"':
            continue
        begin = start
        while begin > 0 and lines[begin - 1].startswith("#"):
            begin -= 1
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        return [line for line in lines[begin:end] if line.startswith("#")]
    return []


def named(entry: Entry, comments: list[str], text: str) -> bool:
    """A comment of the step spells the old name's last component, or the shipped row is
    directly preceded by a comment (its hand decision)."""
    last = entry[1].rpartition(".")[2]
    pattern = re.compile(rf"(?<![\w]){re.escape(last)}(?![\w])")
    if any(pattern.search(line) for line in comments):
        return True
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line == f'old = "{entry[1]}"' and i >= 2 and lines[i - 2].startswith("#"):
            return lines[i - 1].startswith(f"[[step.{entry[0]}]]")
    return False


def run_pair(old: str, new: str, pack: rules.Pack, text: str) -> PairResult:
    version = STEP_OF.get(new, new)
    step = next((s for s in pack.steps if s.version == version), None)
    shipped, intermediate = shipped_entries(step) if step else (set(), 0)
    start = time.perf_counter()
    result = infer(
        open_release(sdist(old)), open_release(sdist(new)), ["vllm_ascend"], version, SCOPE
    )
    seconds = time.perf_counter() - start
    emitted: set[Entry] = {
        (f.kind, f.old, f.new if f.kind != "removed" else "") for f in result.findings if f.active
    }
    out = PairResult(old, new, step.version if step else None, shipped, emitted, intermediate)
    out.seconds = seconds
    comments = step_comments(text, out.step, new)
    for old_name in sorted({e[1] for e in shipped ^ emitted}):
        ours = sorted(e for e in shipped if e[1] == old_name)
        theirs = sorted(e for e in emitted if e[1] == old_name)
        entry = (ours or theirs)[0]
        side = "both, other row" if ours and theirs else "shipped only" if ours else "emitted only"
        commented = any(named(e, comments, text) for e in (*ours, *theirs))
        out.differing.append((entry, side, commented))
    return out


def run_all(only: list[str] | None = None) -> list[PairResult]:
    pack = rules.load_pack("vllm_ascend")
    text = PACK_FILE.read_text(encoding="utf-8")
    results = []
    for old, new in zip(RELEASES, RELEASES[1:], strict=False):
        if only and new not in only:
            continue
        results.append(run_pair(old, new, pack, text))
    return results


def totals(results: list[PairResult]) -> dict[str, int]:
    return {
        "shipped": sum(len(r.shipped) for r in results),
        "emitted": sum(len(r.emitted) for r in results),
        "entries": sum(r.entries for r in results),
        "exact": sum(r.exact for r in results),
        "differing": sum(len(r.differing) for r in results),
        "differing_commented": sum(r.commented for r in results),
        "intermediate_left_out": sum(r.intermediate for r in results),
    }


def markdown(results: list[PairResult]) -> str:
    rows = [
        "| pair | step | shipped | infer emitted | entries | exact | differing "
        "| of which commented |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if not r.shipped and not r.emitted:
            continue
        rows.append(
            f"| {r.old} -> {r.new} | {r.step or '(none)'} | {len(r.shipped)} | {len(r.emitted)} "
            f"| {r.entries} | {r.exact} | {len(r.differing)} | {r.commented} |"
        )
    t = totals(results)
    quiet = sum(1 for r in results if not r.shipped and not r.emitted)
    rows.append(
        f"| total ({len(results)} pairs; {quiet} with nothing shipped or emitted not shown) | "
        f"| {t['shipped']} | {t['emitted']} | {t['entries']} | {t['exact']} | {t['differing']} "
        f"| {t['differing_commented']} |"
    )
    return "\n".join(rows)
