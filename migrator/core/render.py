"""Findings of either tool as text, JSON, GitHub workflow commands or SARIF 2.1.0.

`vam check` and `vam verify-imports` render through the same code; a `Dialect` holds what
differs between them: their codes and levels, the JSON object of one finding, and the GitHub
annotation title, each kept as the tool printed it before (CI log scrapers match those lines).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from migrator import __version__
from migrator.core.codes import ERROR, INFO, WARNING

FORMATS = ("text", "json", "github", "sarif")

_GITHUB_LEVEL = {ERROR: "error", WARNING: "warning", INFO: "notice"}
_SARIF_LEVEL = {ERROR: "error", WARNING: "warning", INFO: "note"}


@dataclass(frozen=True)
class Located:
    """The head both tools' `Finding` dataclasses share: where (`path`; `line`/`col` 1-based,
    0 when unknown) and which stable `code`."""

    path: str
    line: int
    col: int
    code: str


class Reportable(Protocol):
    """What the renderer reads of a finding: a 1-based position (0 when unknown), the code
    and the message."""

    @property
    def path(self) -> str: ...
    @property
    def line(self) -> int: ...
    @property
    def col(self) -> int: ...
    @property
    def code(self) -> str: ...
    @property
    def message(self) -> str: ...


R = TypeVar("R", bound=Reportable)


@dataclass(frozen=True)
class Dialect(Generic[R]):
    """How one tool's findings print where the tools differ.

    `titles`: {code: title} of every code the tool reports (SARIF rules, in code order).
    `level`: a finding's level (codes.ERROR, WARNING or INFO). `as_json`: one finding as a
    JSON object. `github_title`: the annotation title of a code; `title_first`: whether
    `title=` leads the annotation's properties or ends them.
    """

    titles: Mapping[str, str]
    level: Callable[[R], str]
    as_json: Callable[[R], dict[str, object]]
    github_title: Callable[[str], str]
    title_first: bool
    sarif_properties: Callable[[R], dict[str, object]] | None = None


def render(findings: Sequence[R], fmt: str, dialect: Dialect[R]) -> str:
    """The report for `findings` in `fmt` (one of FORMATS; anything else is text); "" for
    text or github output with no findings."""
    if fmt == "json":
        return _dumps([dialect.as_json(f) for f in findings])
    if fmt == "github":
        return "".join(_github(f, dialect) + "\n" for f in findings)
    if fmt == "sarif":
        return _dumps(_sarif(findings, dialect))
    return "".join(text_line(f) + "\n" for f in findings)


def text_line(finding: Reportable) -> str:
    """`path:line:col: CODE message`, the form editors and pre-commit understand."""
    return f"{finding.path}:{_line(finding)}:{_col(finding)}: {finding.code} {finding.message}"


def _line(finding: Reportable) -> int:
    return max(finding.line, 1)


def _col(finding: Reportable) -> int:
    return max(finding.col, 1)


def _dumps(data: object) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _github_escape(text: str, prop: bool = False) -> str:
    """Workflow-command escaping: data escapes %, CR, LF; properties also `:` and `,`."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def _github(finding: R, dialect: Dialect[R]) -> str:
    path = _github_escape(finding.path, prop=True)
    where = f"file={path},line={_line(finding)},col={_col(finding)}"
    title = f"title={_github_escape(dialect.github_title(finding.code), prop=True)}"
    props = f"{title},{where}" if dialect.title_first else f"{where},{title}"
    level = _GITHUB_LEVEL[dialect.level(finding)]
    return f"::{level} {props}::{_github_escape(f'{finding.code} {finding.message}')}"


def _sarif(findings: Sequence[R], dialect: Dialect[R]) -> dict[str, object]:
    codes = sorted(dialect.titles)
    rules = [{"id": c, "shortDescription": {"text": dialect.titles[c]}} for c in codes]
    driver = {
        "name": "vam",
        "version": __version__,
        "informationUri": "https://github.com/vam-project/vam",
        "rules": rules,
    }
    results = [_sarif_result(f, codes.index(f.code), dialect) for f in findings]
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "results": results}],
    }


def _sarif_result(f: R, index: int, dialect: Dialect[R]) -> dict[str, object]:
    result: dict[str, object] = {
        "ruleId": f.code,
        "ruleIndex": index,
        "level": _SARIF_LEVEL[dialect.level(f)],
        "message": {"text": f.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": _uri(f.path)},
                    "region": {"startLine": _line(f), "startColumn": _col(f)},
                }
            }
        ],
    }
    properties = dialect.sarif_properties(f) if dialect.sarif_properties else {}
    if properties:
        result["properties"] = properties
    return result


def _uri(path: str) -> str:
    """A SARIF artifact URI: a relative reference, percent-encoded (`#`, `%`, spaces)."""
    return urllib.parse.quote(path.replace("\\", "/"), safe="/")
