"""What `vam verify-api` reports: one `ApiFinding` per break, keyed for baseline files by
file, code and the qualified object (never the line: a baseline survives edits above it).

Codes (docs: `vam rule CODE`, texts in migrator/core/codes/vap.py): VAP001-VAP004 an
override that no longer fits the upstream method (a parameter added, removed, renamed, made
keyword-only), VAP005 a `super()` call the upstream method now rejects, VAP006/VAP007 a call
of an upstream callable with a keyword or argument count it no longer takes / without a
parameter it now requires, VAP008 an attribute the upstream class no longer defines; VAP100
(warning) a method overriding one the upstream class no longer has; VAP900 a file that
does not parse (none of its uses checked).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from migrator.core import codes
from migrator.core.render import Dialect, Located
from migrator.core.render import render as render_as

PARAM_ADDED = "VAP001"
PARAM_REMOVED = "VAP002"
PARAM_RENAMED = "VAP003"
PARAM_KEYWORD_ONLY = "VAP004"
SUPER_CALL = "VAP005"
BAD_KEYWORD = "VAP006"
MISSING_ARGUMENT = "VAP007"
MISSING_ATTRIBUTE = "VAP008"
ABSTRACT_ADDED = "VAP009"
OVERRIDES_NOTHING = "VAP100"
UNPARSED = "VAP900"

SEVERITY = codes.levels("VAP")
CODE_TITLES = codes.titles("VAP")
BASELINE_FORMAT = 1


@dataclass(frozen=True, order=True)
class ApiFinding(Located):
    """One break at `path:line:col`; `obj` the upstream object it is about (`vllm.x.C.m`,
    `vllm.x.C.attr`), `scope` the project code that uses it (`pkg.mod.Cls.meth`)."""

    message: str
    obj: str = ""
    scope: str = ""

    @property
    def severity(self) -> str:
        return SEVERITY[self.code]

    @property
    def is_error(self) -> bool:
        return SEVERITY[self.code] == codes.ERROR

    @property
    def key(self) -> tuple[str, str, str]:
        """What a baseline file records: file, code, `scope -> obj`."""
        return (self.path, self.code, f"{self.scope} -> {self.obj}")


def _as_json(f: ApiFinding) -> dict[str, object]:
    return {"path": f.path, "line": f.line, "column": f.col, "code": f.code,
            "severity": f.severity, "message": f.message, "object": f.obj, "scope": f.scope}


API = Dialect[ApiFinding](CODE_TITLES, lambda f: f.severity, _as_json, github_title=str,
                          title_first=False)


def render(found: Sequence[ApiFinding], fmt: str) -> str:
    """The report in `fmt` (text, json, github, sarif); "" for text/github with none."""
    return render_as(found, fmt, API)


def write_baseline(path: Path, found: Iterable[ApiFinding]) -> None:
    """Record `found` (by `key`, with counts) as JSON at `path`.

    Raises OSError when it cannot be written."""
    counts = Counter(f.key for f in found)
    rows = [{"path": p, "code": c, "object": o, "count": n}
            for (p, c, o), n in sorted(counts.items())]
    path.write_text(json.dumps({"format": BASELINE_FORMAT, "findings": rows}, indent=2) + "\n",
                    encoding="utf-8")


def read_baseline(path: Path) -> Counter[tuple[str, str, str]]:
    """The keys a baseline file records, with counts.

    Raises ValueError (a one-line message) for a file that is missing or not a baseline."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = data["findings"] if data.get("format") == BASELINE_FORMAT else None
        if not isinstance(rows, list):
            raise TypeError("no format 1 findings list")
        return Counter({(str(r["path"]), str(r["code"]), str(r["object"])): int(r["count"])
                        for r in rows})
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not a verify-api baseline ({exc})") from None


def new_only(found: Sequence[ApiFinding], known: Counter[tuple[str, str, str]]
             ) -> list[ApiFinding]:
    """`found` less those a baseline records (each recorded key absorbs as many findings as
    its count)."""
    left = Counter(known)
    out = []
    for finding in found:
        if left[finding.key] > 0:
            left[finding.key] -= 1
        else:
            out.append(finding)
    return out


def summary(found: Sequence[ApiFinding], files: int, seconds: float, mode: str,
            known: int = 0) -> str:
    errors = sum(f.is_error for f in found)
    warnings = len(found) - errors
    failing = len({f.path for f in found if f.is_error})
    where = f" in {failing} file{'s' * (failing != 1)}" if failing else ""
    held = f", {known} in the baseline" if known else ""
    return (f"vam verify-api ({mode}): {errors} error{'s' * (errors != 1)}, {warnings} "
            f"warning{'s' * (warnings != 1)}{where}{held}; {files} file{'s' * (files != 1)} "
            f"scanned ({seconds:.2f} s)")
