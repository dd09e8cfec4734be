"""Import statements, and the imports that rewritten attribute chains need.

A statement is rewritten through the libcst `ImportTransformer` (the statement alone is
parsed); in report-only mode it is judged from the ast with the same planner, without libcst.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace

from migrator.core import findings as F
from migrator.core.edits import NEWLINE
from migrator.rewrite.import_plan import ImportContext, statement_findings
from migrator.rewrite.sites.buffer import EditBuffer
from migrator.rewrite.sites.context import SiteContext
from migrator.rewrite.sites.strings import rewrite_text

_REST_IS_COMMENT = re.compile(r"[ \t\f]*(#[^\r\n]*)?")


def rewrite_imports(ctx: SiteContext, buf: EditBuffer) -> None:
    for node in ctx.sites.imports:
        start, end = ctx.smap.span(node)
        line_end = _comment_only_after(ctx, end)
        if line_end is not None:
            end = line_end  # take the trailing comment along: a split keeps it on top
        first = ctx.smap.position(start)[0]
        last = ctx.smap.position(end)[0]
        buf.import_lines.update(range(first, last + 1))
        if buf.skip(start, end) or id(node) in buf.kept:
            continue
        if ctx.options.report_only:
            buf.findings.extend(buf.at(f, start) for f in _statement_findings(ctx, node))
        else:
            _rewrite_statement(ctx, buf, start, end)


def _comment_only_after(ctx: SiteContext, end: int) -> int | None:
    """The end of the line holding `end` if only a comment follows `end` there, else None."""
    rest = _REST_IS_COMMENT.match(ctx.smap.text, end)
    line_end = ctx.smap.line_end(end)
    return line_end if rest is not None and rest.end() == line_end else None


def _statement_findings(ctx: SiteContext, node: ast.stmt) -> list[F.Finding]:
    """The findings `_rewrite_statement` would report, from the ast alone."""
    return statement_findings(node, ctx.resolver, ctx.package)


def _rewrite_statement(ctx: SiteContext, buf: EditBuffer, start: int, end: int) -> None:
    segment = ctx.smap.text[start:end]
    indent = ctx.smap.indentation(start)
    import_ctx = ImportContext(
        ctx.resolver,
        ctx.package,
        line_length=ctx.options.line_length if indent is not None else None,
        style=ctx.style,
        indent=len(indent or ""),
        comments=ctx.options.comments,
    )
    import libcst as cst  # only files with an import to rewrite pay for libcst

    from migrator.rewrite.transformer import ImportTransformer

    newline = buf.newline
    try:
        module = cst.parse_module(
            segment + newline, config=cst.PartialParserConfig(default_newline=newline)
        )
    except cst.ParserSyntaxError:
        rewrite_text(ctx, buf, start, end, "from-import")  # syntax newer than libcst knows
        return
    transformer = ImportTransformer(import_ctx)
    new_module = module.visit(transformer)
    buf.findings.extend(buf.at(f, start) for f in transformer.findings)
    # The segment never ends in a newline; libcst may or may not keep the one added
    # (it drops a lone CR at the end of a module).
    new = new_module.code.rstrip("\r\n")
    if new == segment:
        return
    if len(new_module.body) > 1 and indent is None:
        new = "; ".join(cst.Module(body=[s]).code.rstrip("\r\n") for s in new_module.body)
    elif len(new_module.body) > 1 or transformer.wrapped or not NEWLINE.search(segment):
        # Lines this rewrite created sit at the statement's own indentation.
        new = new.replace(newline, newline + (indent or ""))
    buf.edit(start, end, new)


def add_imports(ctx: SiteContext, buf: EditBuffer) -> None:
    """Commit the chains that reach moved symbols, adding `import new.module` after the
    `import old.module` that made the old chain work.

    The new import goes on its own line at the holder's indentation, so it is exactly as
    conditional as the old one. A holder that shares its line with other code (`try:
    import m`, `if c: import m`, `import m; x = 1`, a backslash continuation) leaves no
    safe place: those chains are reported for a human instead of breaking the file.
    """
    if not buf.held:
        return
    present = set()
    holders: dict[str, ast.Import] = {}
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is None:
                    present.add(alias.name)
                    holders.setdefault(alias.name, node)
    for (new, old), chains in buf.held.items():
        holder = holders.get(old)
        if new in present or holder is None:
            buf.commit(chains)
            continue
        start, end = ctx.smap.span(holder)
        line_end = _comment_only_after(ctx, end)
        indent = ctx.smap.indentation(start)
        if indent is None or line_end is None:
            where = f"line {ctx.smap.position(start)[0]}"
            for _, finding in chains:
                message = (
                    f"{finding.message}; it needs `import {new}` next to `import {old}` "
                    f"({where}), which shares its line with other code"
                )
                buf.findings.append(replace(finding, code=F.NEEDS_HUMAN, message=message))
            continue
        buf.commit(chains)
        buf.edit(line_end, line_end, f"{buf.newline}{indent}import {new}")
