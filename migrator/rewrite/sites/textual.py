"""Helpers several site rewriters share: a text rewrite of one span, an import statement
written in text (a comment, a doctest line), the span an import statement claims. Not a
rewriter."""

from __future__ import annotations

import ast

from migrator.core import findings as F
from migrator.core.placement import comment_only_after
from migrator.rewrite import text as T
from migrator.rewrite.comment_imports import ImportLineRewriter
from migrator.rewrite.import_plan import ImportContext, judge_import_line
from migrator.rewrite.records import traceback_lines
from migrator.rewrite.sites import lanes
from migrator.rewrite.sites.context import Protected, SiteContext, SiteOutput


def rewrite_text(
    ctx: SiteContext,
    protected: Protected,
    out: SiteOutput,
    start: int,
    end: int,
    kind: str,
    skip: list[tuple[int, int]] | None = None,
) -> set[str]:
    """Text-rewrite `text[start:end]` into `out`; returns the old texts of the references
    found. References inside the `skip` spans are someone else's."""
    segment = ctx.smap.text[start:end]
    found = set()
    records = _traceback_spans(segment)
    for edit in T.find_references(segment, ctx.resolver):
        found.add(edit.old)
        at = start + edit.start
        if skip and any(a <= at < b for a, b in skip):
            continue
        if protected.skip(at, start + edit.end):
            continue
        if any(a <= edit.start < b for a, b in records):
            out.report(F.kept(edit, F.RECORD, F.RECORD_WHERE, kind), at)
            continue
        if kind == "string" and edit.fixable and lanes.splits(ctx, edit.resolution.name):
            # Part of a longer string: no conditional expression can carry both lanes.
            version = ctx.options.keep_compat or ""
            out.report(lanes.lane_conflict(edit.old, edit.new, kind, version), at)
            continue
        out.report(F.text_finding(edit, kind), at)
        if edit.fixable:
            out.edit(at, start + edit.end, edit.new)
    return found


def import_line(
    lead: str, code: str, ctx: ImportContext, kind: str = "comment"
) -> tuple[list[str] | None, list[F.Finding]] | None:
    """`migrator.rewrite.transformer.rewrite_import_line`, loading libcst only once some
    text looks like an import statement."""
    from migrator.rewrite.transformer import rewrite_import_line

    return rewrite_import_line(lead, code, ctx, kind)


def import_line_rewriter(ctx: SiteContext) -> ImportLineRewriter:
    """What re-plans an import statement written in text (a comment, a doctest line) in
    this run: in report-only mode the `ast` judge, which needs no libcst (its import alone
    costs more than checking most files)."""
    return judge_import_line if ctx.options.report_only else import_line


def import_span(ctx: SiteContext, node: ast.stmt) -> tuple[int, int]:
    """The span of an import statement, with the comment that ends its line (a split
    keeps it on top)."""
    start, end = ctx.smap.span(node)
    line_end = comment_only_after(ctx.smap.text, end)
    return start, end if line_end is None else line_end


def _traceback_spans(segment: str) -> list[tuple[int, int]]:
    """Spans of the lines of `segment` (a docstring, a string) that belong to a traceback
    pasted in it (`migrator.rewrite.records`): kept as they are."""
    if 'File "' not in segment:
        return []
    lines = segment.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    return [(starts[i], starts[i + 1]) for i in sorted(traceback_lines(lines))]
