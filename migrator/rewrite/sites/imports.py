"""Import statements.

A statement is rewritten through the libcst `ImportTransformer` (the statement alone is
parsed); in report-only mode it is judged from the ast with the same planner, without libcst.
The imports rewritten attribute chains need are phase 3's (`finish.py`). With
`--keep-compat`, a statement whose lane on VERSION differs becomes a dual-lane block
(`lanes.py`).
"""

from __future__ import annotations

from migrator.core import findings as F
from migrator.core.edits import NEWLINE
from migrator.core.placement import comment_only_after
from migrator.core.resolver import Resolver
from migrator.rewrite.import_plan import ImportContext, statement_findings
from migrator.rewrite.sites import lanes
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
    rewritten = _rewritten(ctx, ctx.resolver, segment, indent)
    if rewritten is None:
        # Syntax newer than libcst knows.
        rewrite_text(ctx, protected, out, start, end, "from-import")
        return
    new, findings = rewritten
    if new != segment and ctx.options.keep_compat is not None:
        findings = _dual_lane(ctx, out, (start, end), indent, new, findings)
        new = segment if findings and findings[0].code == F.NEEDS_HUMAN else new
    out.findings.extend(ctx.at(f, start) for f in findings)
    if new != segment:
        out.edit(start, end, new)


def _dual_lane(
    ctx: SiteContext,
    out: SiteOutput,
    span: tuple[int, int],
    indent: str | None,
    new: str,
    findings: list[F.Finding],
) -> list[F.Finding]:
    """`--keep-compat`: the block of both lanes into `out` when VERSION's lane differs from
    `new`; the findings to report (a VAM002 first: the statement stays as it is)."""
    start, end = span
    segment = ctx.smap.text[start:end]
    capped = lanes.old_resolver(ctx)
    old = segment if capped is None else (_rewritten(ctx, capped, segment, indent) or (segment,))[0]
    if old == new:
        return findings
    lane = lanes.lanes_of(ctx)
    shown = segment.split(ctx.newline)[0]
    if indent is None or comment_only_after(ctx.smap.text, end) is None:
        message = (
            f"'{shown}' needs two lanes (--keep-compat {ctx.options.keep_compat}) but shares "
            "its line with other code: put it on a line of its own"
        )
        return [F.needs_human("import", message)]
    if ctx.options.compat_style == "if" and not lane.ready:
        return [lane.not_ready(shown, "import")]
    out.edit(start, end, lane.block(indent, old, new))
    if ctx.options.compat_style == "if":
        out.helper_uses.append(start)
    return findings


def _rewritten(
    ctx: SiteContext, resolver: Resolver, segment: str, indent: str | None
) -> tuple[str, list[F.Finding]] | None:
    """`segment` (one import statement) as `resolver` rewrites it, and the findings; None
    when libcst cannot parse it."""
    import_ctx = ImportContext(
        resolver,
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
        return None
    transformer = ImportTransformer(import_ctx)
    new_module = module.visit(transformer)
    findings = list(transformer.findings)
    # The segment never ends in a newline; libcst may or may not keep the one added
    # (it drops a lone CR at the end of a module).
    new = new_module.code.rstrip("\r\n")
    if new == segment:
        return new, findings
    if len(new_module.body) > 1 and indent is None:
        new = "; ".join(cst.Module(body=[s]).code.rstrip("\r\n") for s in new_module.body)
    elif len(new_module.body) > 1 or transformer.wrapped or not NEWLINE.search(segment):
        # Lines this rewrite created sit at the statement's own indentation.
        new = new.replace(newline, newline + (indent or ""))
    return new, findings
