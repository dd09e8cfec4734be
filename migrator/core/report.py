"""`vam migrate`/`vam check` output: findings (rendered by migrator.core.render), diffs,
summaries."""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable, Sequence

from migrator.core import codes
from migrator.core import findings as F
from migrator.core.codes import ERROR, INFO, WARNING
from migrator.core.render import FORMATS, Dialect, text_line
from migrator.core.render import render as render_as

__all__ = [
    "FORMATS",
    "MIGRATE",
    "is_info",
    "kind_counts",
    "render",
    "summary",
    "text_line",
    "unified_diff",
]

_LEVELS = codes.levels("VAM")


def _level(finding: F.Finding) -> str:
    # VAM002 needs a decision, not a fix: a warning in CI annotations, whatever its exit code.
    return WARNING if finding.code == F.NEEDS_HUMAN else _LEVELS.get(finding.code, ERROR)


def is_info(finding: F.Finding) -> bool:
    """Whether `finding` is info only: printed, but never stale and never a failing exit."""
    return _level(finding) == INFO


def _as_json(finding: F.Finding) -> dict[str, object]:
    return {
        "code": finding.code,
        "message": finding.message,
        "path": finding.path,
        "line": max(finding.line, 1),
        "column": max(finding.col, 1),
        "kind": finding.kind,
        "old": finding.old,
        "new": finding.new or None,
        "step": finding.step or None,
        "pack": finding.pack or None,
        "fixable": finding.fixable,
    }


def _sarif_properties(finding: F.Finding) -> dict[str, object]:
    """Which table and step a finding came from (several packs may run at once)."""
    return {"pack": finding.pack, "step": finding.step} if finding.step else {}


MIGRATE = Dialect[F.Finding](
    F.CODE_TITLES, _level, _as_json, github_title=lambda code: f"vam ({code})", title_first=True,
    sarif_properties=_sarif_properties,
)


def render(findings: Sequence[F.Finding], fmt: str) -> str:
    """`vam check`'s report in `fmt`, one of FORMATS."""
    return render_as(findings, fmt, MIGRATE)


def unified_diff(path: str, old: bytes, new: bytes, encoding: str = "utf-8") -> str:
    """A unified diff of two versions of a file, as `patch -p1` and `git apply` read it.

    Bytes are decoded leniently for display; a BOM stays part of the first line (so the hunk
    matches the file). Lines split at CR, LF or CRLF only, and every diff line ends in LF.
    """
    codec = "utf-8" if encoding == "utf-8-sig" else encoding
    before = _lines(old.decode(codec, errors="replace"))
    after = _lines(new.decode(codec, errors="replace"))
    out = []
    # As `git diff --no-index` writes an absolute path: `a/tmp/x.py`, not `a//tmp/x.py`.
    name = path.lstrip("/")
    for line in difflib.unified_diff(before, after, fromfile=f"a/{name}", tofile=f"b/{name}"):
        if line.endswith("\n"):
            out.append(line)
        elif line.endswith("\r"):
            out.append(line + "\n")
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _lines(text: str) -> list[str]:
    return [m.group() for m in re.finditer(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)]


def kind_counts(findings: Iterable[F.Finding]) -> Counter[str]:
    return Counter(f.kind for f in findings if f.code == F.MOVED)


def summary(
    scanned: int, parsed: int, changed: int, failed: int, kinds: Counter[str], dry_run: bool
) -> str:
    """The closing lines of a run: counts of files and of references by kind."""
    verb = "would change" if dry_run else "changed"
    refs = sum(kinds.values())
    lines = [
        f"vam: {scanned} files scanned, {parsed} parsed, {changed} {verb}, {failed} failed; "
        f"{refs} references {'to rewrite' if dry_run else 'rewritten'}"
    ]
    width = max((len(k) for k in kinds), default=0)
    for kind, count in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"  {kind.ljust(width)}  {count}")
    return "\n".join(lines)
