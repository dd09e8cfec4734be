"""Import statements.

A statement is rewritten through the libcst `ImportTransformer` (the statement alone is
parsed); in report-only mode it is judged from the ast with the same planner, without libcst.
The imports rewritten attribute chains need are phase 3's (`finish.py`).
"""

from __future__ import annotations

from migrator.core.edits import NEWLINE
from migrator.rewrite.import_plan import ImportContext, statement_findings
from migrator.rewrite.sites.context import Protected, SiteContext, SiteEdits, SiteOutput
from migrator.rewrite.sites.textual import import_span, rewrite_text


def rewrite_imports(ctx: SiteContext, protected: Protected) -> SiteEdits:
    out = SiteOutput(ctx)
    for node in ctx.sites.imports:
        start, end = import_span(ctx, node)
        if protected.skip(start, end) or protected.keeps(node):
            continue
        if ctx.options.report_only:
            found = statement_findings(node, ctx.resolver, ctx.package)
            out.findings.extend(ctx.at(f, start) for f in found)
        else:
            _rewrite_statement(ctx, protected, out, start, end)
    return out.done()


def _rewrite_statement(
    ctx: SiteContext, protected: Protected, out: SiteOutput, start: int, end: int
) -> None:
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

    newline = ctx.newline
    try:
        module = cst.parse_module(
            segment + newline, config=cst.PartialParserConfig(default_newline=newline)
        )
    except cst.ParserSyntaxError:
        # Syntax newer than libcst knows.
        rewrite_text(ctx, protected, out, start, end, "from-import")
        return
    transformer = ImportTransformer(import_ctx)
    new_module = module.visit(transformer)
    out.findings.extend(ctx.at(f, start) for f in transformer.findings)
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
    out.edit(start, end, new)
