"""Comments on the lines that spell a moved name, outside import statements.

A commented-out import statement is re-planned by the import rules; any other comment is
text (`migrator.rewrite.comment_imports`).
"""

from __future__ import annotations

from migrator.rewrite.comment_imports import rewrite_comment
from migrator.rewrite.sites.context import Protected, SiteContext, SiteEdits, SiteOutput
from migrator.rewrite.sites.textual import import_line_rewriter


def rewrite_comments(ctx: SiteContext, protected: Protected) -> SiteEdits:
    out = SiteOutput(ctx)
    if not ctx.options.comments:
        return out.done()
    wanted = ctx.lines - protected.import_lines
    spans = _string_spans_by_line(ctx, wanted)
    statement_ctx = ctx.statement_context()
    import_line = import_line_rewriter(ctx)
    for number in sorted(wanted):
        line_start = ctx.smap.starts[number - 1]
        hash_at = _comment_start(ctx.smap.line(number), line_start, spans.get(number, []))
        if hash_at is None:
            continue
        start = line_start + hash_at
        end = ctx.smap.line_end(start)
        if protected.skip(start, end):
            continue
        new_lines, findings = rewrite_comment(ctx.smap.text[start:end], statement_ctx, import_line)
        out.findings.extend(ctx.at(f, start) for f in findings)
        if new_lines is None:
            continue
        indent = ctx.smap.indentation(start)
        if indent is None:
            new = "; ".join([new_lines[0], *(x.lstrip("#").lstrip() for x in new_lines[1:])])
        else:
            new = (ctx.newline + indent).join(new_lines)
        out.edit(start, end, new)
    return out.done()



def _string_spans_by_line(ctx: SiteContext, wanted: set[int]) -> dict[int, list[tuple[int, int]]]:
    """Spans of the string literals that touch each wanted line (so `#` in them is no
    comment), indexed by line: one pass, however many strings and comments a file has."""
    by_line: dict[int, list[tuple[int, int]]] = {}
    for node in (*ctx.sites.strings, *ctx.sites.fstrings):
        span = ctx.smap.span(node)
        for number in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            if number in wanted:
                by_line.setdefault(number, []).append(span)
    return by_line


def _comment_start(line: str, line_start: int, spans: list[tuple[int, int]]) -> int | None:
    """Index of the `#` that opens a comment on `line`, skipping `#` inside strings."""
    index = line.find("#")
    while index >= 0:
        offset = line_start + index
        if not any(start <= offset < end for start, end in spans):
            return index
        index = line.find("#", index + 1)
    return None
