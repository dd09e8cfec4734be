"""Candidates -> a move table (one `[pack]`, one `[[step]]`) in the bundled TOML format.

Deterministic: entries are sorted by kind then `old`, and every entry is preceded by one
`# evidence:` line. Entries that need a decision are written commented out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from migrator.infer.candidate import Candidate

_SECTIONS = (
    ("module", "Module moves: `old` and every dotted name below it now live under `new`."),
    ("symbol", "Symbol moves: the old module stays; only these names left it."),
    ("removed", "Removals: gone, no replacement found (reported, never rewritten)."),
)


@dataclass(frozen=True)
class Header:
    """What the table says about where it came from."""

    name: str
    packages: tuple[str, ...]
    old_version: str
    new_version: str
    under: str | None


def render(header: Header, findings: list[Candidate]) -> str:
    """The TOML text of the inferred table."""
    active = [f for f in findings if f.active]
    counts = {kind: sum(1 for f in active if f.kind == kind) for kind, _ in _SECTIONS}
    scope = f", scope {header.under}" if header.under else ""
    lines = [
        "# Inferred by `vam rules infer` (static: read with ast, nothing imported).",
        f"# {header.old_version} -> {header.new_version}{scope}. Review before use: each entry",
        "# has its evidence; commented-out entries need a decision (see rules/README.md).",
        "",
        "[pack]",
        f"name = {_quote(header.name)}",
        f"description = {_quote(f'inferred: {header.old_version} -> {header.new_version}')}",
        f"packages = [{', '.join(_quote(p) for p in header.packages)}]",
        "",
        "[[step]]",
        f"version = {_quote(header.new_version)}",
        "summary = "
        + _quote(
            f"inferred from {header.old_version}: {counts['module']} module moves, "
            f"{counts['symbol']} symbol moves, {counts['removed']} removals"
        ),
    ]
    for kind, title in _SECTIONS:
        entries = sorted((f for f in findings if f.kind == kind), key=_order)
        if entries:
            lines += ["", f"# {title}"]
        for finding in entries:
            lines += ["", *_entry(finding)]
    return "\n".join(lines) + "\n"


def _order(finding: Candidate) -> tuple[bool, bool, str, str]:
    return (finding.intermediate, not finding.active, finding.old, finding.new)


def _entry(finding: Candidate) -> list[str]:
    evidence = finding.evidence
    if finding.blocked:
        evidence = f"NOT APPLIED ({finding.blocked}): {evidence}"
    body = [f"[[step.{finding.kind}]]", f"old = {_quote(finding.old)}"]
    if finding.kind == "removed":
        body.append(f"hint = {_quote(finding.hint)}")
    elif finding.new:
        body.append(f"new = {_quote(finding.new)}")
    if finding.candidates:
        body.append(f"# candidates: {', '.join(finding.candidates)}")
    if finding.submodules:
        body.append("submodules = [")
        body += [f"    {_quote(s)}," for s in finding.submodules]
        body.append("]")
    if finding.intermediate:
        body.append("intermediate = true")
    if finding.blocked:
        body = [line if line.startswith("#") else f"# {line}" for line in body]
    return [f"# evidence: {evidence}", *body]


def _quote(text: str) -> str:
    """A TOML basic string (JSON's escapes are a subset TOML accepts)."""
    return json.dumps(text, ensure_ascii=True)
