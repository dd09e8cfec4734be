"""Comments and doctests: an import statement written in one (`# from m import x`,
`>>> import m`) follows the import rules; any other comment is text."""

from __future__ import annotations

import re

from migrator import findings as F
from migrator import text as T
from migrator.imports import ImportContext

_COMMENTED_IMPORT = re.compile(r"(#\s*)((?:from|import)\s.*)$", re.S)


def rewrite_comment(value: str, ctx: ImportContext) -> tuple[list[str] | None, list[F.Finding]]:
    """New text of a comment (one entry per resulting line, None when nothing changes).

    Commented-out code counts as code: an import statement is re-planned by the import
    rules; any other comment goes through the text rewriter. Findings carry no positions.
    """
    match = _COMMENTED_IMPORT.match(value)
    if match:
        result = rewrite_import_line(match.group(1), match.group(2), ctx)
        if result is not None:
            return result
    new, edits = T.rewrite(value, ctx.resolver)
    findings = [F.text_finding(edit, "comment") for edit in edits]
    return (None if new == value else [new]), findings


def rewrite_import_line(
    lead: str, code: str, ctx: ImportContext, kind: str = "comment"
) -> tuple[list[str] | None, list[F.Finding]] | None:
    """Re-plan one import statement written after `lead` (`# `, `>>> `) in text.

    Returns the new lines (each with `lead`; None when nothing changes) and the findings,
    or None when `code` is not a single import statement.
    """
    import libcst as cst  # only comments that look like imports pay for libcst

    from migrator.transformer import ImportTransformer

    try:
        statement = cst.parse_statement(code)
    except cst.ParserSyntaxError:
        return None
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    if not isinstance(statement.body[0], (cst.Import, cst.ImportFrom)):
        return None
    sub = ImportTransformer(ImportContext(ctx.resolver, ctx.package, comments=False))
    new = cst.Module(body=[statement]).visit(sub)
    findings = [
        F.Finding("", 0, 0, f.code, kind, f.message, f.old, f.new, f.step)
        for f in sub.findings
    ]
    if not any(f.fixable for f in findings):
        return None, findings
    return [lead + line for line in new.code.rstrip("\r\n").splitlines()], findings
