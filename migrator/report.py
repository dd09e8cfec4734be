"""Turns findings into text, JSON, GitHub annotations, SARIF, diffs and run summaries."""

from __future__ import annotations

import difflib
import json
import re
import urllib.parse
from collections import Counter
from collections.abc import Iterable, Sequence

from migrator import __version__
from migrator import findings as F

FORMATS = ("text", "json", "github", "sarif")


def text_line(finding: F.Finding) -> str:
    """`path:line:col: CODE message`, the form editors and pre-commit understand."""
    where = f"{finding.path}:{max(finding.line, 1)}:{max(finding.col, 1)}"
    return f"{where}: {finding.code} {finding.message}"


def render(findings: Sequence[F.Finding], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([_as_dict(f) for f in findings], indent=2, ensure_ascii=False) + "\n"
    if fmt == "github":
        return "".join(_github(f) + "\n" for f in findings)
    if fmt == "sarif":
        return json.dumps(_sarif(findings), indent=2, ensure_ascii=False) + "\n"
    return "".join(text_line(f) + "\n" for f in findings)


def _as_dict(finding: F.Finding) -> dict[str, object]:
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
        "fixable": finding.fixable,
    }


def _github_escape(text: str, prop: bool = False) -> str:
    """Workflow-command escaping: data escapes %, CR, LF; properties also `:` and `,`."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def _github(finding: F.Finding) -> str:
    level = "error" if finding.code != F.NEEDS_HUMAN else "warning"
    message = _github_escape(finding.message)
    return (
        f"::{level} title=vam ({finding.code}),file={_github_escape(finding.path, prop=True)},"
        f"line={max(finding.line, 1)},"
        f"col={max(finding.col, 1)}::{finding.code} {message}"
    )


def _sarif(findings: Sequence[F.Finding]) -> dict[str, object]:
    codes = sorted(F.CODE_TITLES)
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "vam",
                        "version": __version__,
                        "informationUri": "https://github.com/vam-project/vam",
                        "rules": [
                            {"id": c, "shortDescription": {"text": F.CODE_TITLES[c]}} for c in codes
                        ],
                    }
                },
                "results": [
                    {
                        "ruleId": f.code,
                        "ruleIndex": codes.index(f.code),
                        "level": "warning" if f.code == F.NEEDS_HUMAN else "error",
                        "message": {"text": f.message},
                        "locations": [
                            {
                                "physicalLocation": {
                                    "artifactLocation": {"uri": _uri(f.path)},
                                    "region": {
                                        "startLine": max(f.line, 1),
                                        "startColumn": max(f.col, 1),
                                    },
                                }
                            }
                        ],
                    }
                    for f in findings
                ],
            }
        ],
    }


def unified_diff(path: str, old: bytes, new: bytes, encoding: str = "utf-8") -> str:
    """A unified diff of two versions of a file, as `patch -p1` and `git apply` read it.

    Bytes are decoded leniently for display; a BOM stays part of the first line (so the hunk
    matches the file). Lines split at CR, LF or CRLF only, and every diff line ends in LF.
    """
    codec = "utf-8" if encoding == "utf-8-sig" else encoding
    before = _lines(old.decode(codec, errors="replace"))
    after = _lines(new.decode(codec, errors="replace"))
    out = []
    for line in difflib.unified_diff(before, after, fromfile=f"a/{path}", tofile=f"b/{path}"):
        if line.endswith("\n"):
            out.append(line)
        elif line.endswith("\r"):
            out.append(line + "\n")
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _lines(text: str) -> list[str]:
    return [m.group() for m in re.finditer(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)]


def _uri(path: str) -> str:
    """A SARIF artifact URI: a relative reference, percent-encoded (`#`, `%`, spaces)."""
    return urllib.parse.quote(path.replace("\\", "/"), safe="/")


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
