"""What `vam upgrade` leaves for a person, grouped by failure pattern in the order of
vllm-ascend's main2main guide, as text or JSON.

Groups: module reorganisation (imports that still fail at the target), signature changes of
overridden methods, calls with changed parameters, moved or removed attributes (the last
three from verify-api), removed names (with the move table's hint), files vam could not
process. Warnings (an import only a deprecation forwarder still serves) are counted, not
listed as left: the code runs at the target.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from migrator.core import findings as F
from migrator.core.report import is_info
from migrator.upgrade import api
from migrator.upgrade.run import Check, Upgrade
from rules import is_under

MODULES = "module reorganisation: imports that still fail"
REMOVED = "removed names"
UNPROCESSED = api.UNPROCESSED
GROUPS = (MODULES, api.OVERRIDES, api.CALLS, api.ATTRIBUTES, REMOVED, UNPROCESSED)


@dataclass(frozen=True, order=True)
class Item:
    """One thing left for a person: where, which code, a one-line reason."""

    path: str
    line: int
    col: int
    code: str
    reason: str
    group: str


def left(run: Upgrade) -> list[Item]:
    """What is left after the run, one item per site, grouped (GROUPS order), by position."""
    items: dict[tuple[str, int, str], Item] = {}
    for finding in run.migrate_findings:
        if finding.fixable or is_info(finding):
            continue
        group = REMOVED if finding.code == F.REMOVED else \
            UNPROCESSED if finding.code.startswith("VAM9") else MODULES
        _add(items, finding, group)
    # Migrate's removed name and the check's failing import of it are one site: matched by
    # name, as a line inside a rewritten block maps to the block's first line (lines.py).
    gone = {(os.path.normpath(f.path), f.old) for f in run.migrate_findings
            if f.code == F.REMOVED and f.old}
    for finding in run.after.import_errors:
        if _said_removed(finding, gone):
            continue
        removed = "removed" in finding.message
        _add(items, finding, REMOVED if removed else MODULES, keep=True)
    for finding in run.after.api or ():
        group = api.pattern(finding)
        path = os.path.normpath(finding.path)
        if group == UNPROCESSED and any(k[0] == path and k[2] == group for k in items):
            continue  # migrate said already that the file could not be processed
        _add(items, finding, group)
    order = {group: n for n, group in enumerate(GROUPS)}
    return sorted(items.values(), key=lambda i: (order[i.group], i.path, i.line, i.col))


def _said_removed(finding: Any, gone: set[tuple[str, str]]) -> bool:
    """Whether migrate already reported the import `finding` is about as removed."""
    path = os.path.normpath(finding.path)
    dotted = f"{finding.module}.{finding.name}" if finding.name else finding.module
    return any(p == path and (is_under(dotted, old) or is_under(old, dotted))
               for p, old in gone)


def _add(items: dict[tuple[str, int, str], Item], finding: Any, group: str,
         keep: bool = False) -> None:
    """One item per (file, line, group); migrate's finding wins over verify-imports' at the
    same line (`keep`): it carries the table's hint."""
    path = os.path.normpath(finding.path)
    key = (path, finding.line, group)
    if keep and any(k[:2] == key[:2] for k in items):
        return
    reason = " ".join(finding.message.split())
    items[key] = Item(path, finding.line, finding.col, finding.code, reason, group)


def _sites(found: list[Any] | None) -> list[dict[str, Any]] | None:
    if found is None:
        return None
    return [{"path": os.path.normpath(f.path), "line": f.line, "col": f.col, "code": f.code,
             "message": f.message} for f in found]


def _counts(check: Check) -> dict[str, int | None]:
    return {"import_errors": len(check.import_errors),
            "import_warnings": len(check.imports) - len(check.import_errors),
            "api": None if check.api is None else len(check.api)}


def as_json(run: Upgrade, label: str, items: list[Item], written: bool) -> str:
    """The run as one JSON object: target, baseline, compat form, notes, the checks' counts
    before and after, verify-api's findings before the migration (`api_before`: what broke,
    null without verify-api), the files migrate changed, and the items left (each with its
    group)."""
    data = {
        "target": label, "version": run.version, "baseline": run.baseline,
        "compat": run.compat, "notes": run.notes, "written": written,
        "before": _counts(run.before), "after": _counts(run.after),
        "api_before": _sites(run.before.api),
        "changed": [os.path.normpath(r.path) for r in run.changed],
        "left": [asdict(i) for i in items],
    }
    return json.dumps(data, indent=2) + "\n"


def as_text(run: Upgrade, label: str, items: list[Item], written: bool) -> str:
    """The reviewer's report: one header block, then each non-empty group with its items."""
    lines = [f"vam upgrade {label}: from {run.baseline or 'an unknown baseline'}, "
             f"import moves written {_form(run)}"]
    lines += [f"  note: {note}" for note in run.notes]
    lines.append(f"  before: {_said(run.before)}")
    lines.append(f"  migrate: {len(run.changed)} file(s) "
                 f"{'changed' if written else 'to change (diff above; --write applies it)'}")
    lines.append(f"  after: {_said(run.after)}")
    if not items:
        lines.append("Nothing left for a person.")
        return "\n".join(lines) + "\n"
    lines.append(f"Left for a person: {len(items)}")
    for group in GROUPS:
        mine = [i for i in items if i.group == group]
        if mine:
            lines.append(f"\n{group} ({len(mine)})")
            lines += [f"  {i.path}:{i.line}:{i.col}: {i.code} {i.reason}" for i in mine]
    return "\n".join(lines) + "\n"


def _form(run: Upgrade) -> str:
    if run.compat == "plain":
        return "in plain form"
    helper = "if vllm_version_is" if run.compat == "if" else "try/except ImportError"
    return f"in dual-lane form ({helper}, old lane kept for {run.baseline})"


def _said(check: Check) -> str:
    counts = _counts(check)
    parts = [f"{counts['import_errors']} import(s) fail", f"{counts['import_warnings']} import "
             "warning(s)"]
    parts.append("API not checked" if counts["api"] is None else f"{counts['api']} API break(s)")
    return ", ".join(parts)
