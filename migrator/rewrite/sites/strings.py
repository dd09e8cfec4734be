"""String literals, docstrings and f-strings.

A literal is text: every reference in it is rewritten in place. Two kinds of string need
more: doctest lines that import (`>>> from m import x`) follow the import rules, and a
literal that ends in `pkg.parent.` completed at run time by a format field cannot be
rewritten at all.
"""

from __future__ import annotations

import ast
import re

from migrator.core import findings as F
from migrator.core.resolver import Resolver
from migrator.rewrite import text as T
from migrator.rewrite.sites import lanes
from migrator.rewrite.sites.context import Protected, SiteContext, SiteEdits, SiteOutput
from migrator.rewrite.sites.textual import import_line_rewriter, rewrite_text
from rules import is_under

_DOCTEST_IMPORT = re.compile(r"(?m)^([ \t]*>>>[ \t]+)((?:from|import)[ \t][^\r\n]*)$")
# A dotted prefix completed at run time: f"pkg.{x}", "pkg.{}".format(x), "pkg.%s" % x.
_OPEN_PREFIX = re.compile(rf"(?<![A-Za-z0-9_.])({T.IDENT}(?:\.{T.IDENT})*)\.(?:\{{|%)")


def rewrite_strings(ctx: SiteContext, protected: Protected) -> SiteEdits:
    out = SiteOutput(ctx)
    lane = lanes.lanes_of(ctx) if ctx.options.keep_compat is not None else None
    for node in ctx.sites.strings:
        docstring = id(node) in ctx.sites.docstrings
        if (docstring and not ctx.options.comments) or protected.keeps(node):
            continue
        if lane and not docstring and lanes.conditional_string(lane, protected, out, node):
            continue
        start, end = ctx.smap.span(node)
        kind = "docstring" if docstring else "string"
        doctests = _doctest_imports(ctx, protected, out, start, end, kind)
        found = rewrite_text(ctx, protected, out, start, end, kind, skip=doctests)
        _open_prefixes(ctx, protected, out, start, end)
        raw = node.value
        value = raw if isinstance(raw, str) else bytes(raw).decode("latin-1")  # type: ignore[arg-type]
        for edit in T.find_references(value, ctx.resolver):
            if edit.fixable and edit.old not in found:
                message = (
                    f"'{edit.old}' is split across adjacent string literals or written with "
                    f"escapes; write '{edit.new}'"
                )
                out.report(F.needs_human(kind, message, old=edit.old), start)
    return out.done()


def rewrite_fstrings(ctx: SiteContext, protected: Protected) -> SiteEdits:
    out = SiteOutput(ctx)
    for node in ctx.sites.fstrings:
        start, end = ctx.smap.span(node)
        rewrite_text(ctx, protected, out, start, end, "string")
        _open_prefixes(ctx, protected, out, start, end)
    return out.done()


def report_concatenations(ctx: SiteContext, protected: Protected) -> SiteEdits:
    """A name built with `+` from string literals (`"pkg.parent." + "child"`, also across
    lines in parentheses) cannot be rewritten piece by piece: it is reported for a human."""
    out = SiteOutput(ctx)
    for operands in ctx.sites.concatenations:
        for run in _literal_runs(operands):
            ends, joined = [], ""
            for literal in run:
                joined += str(literal.value)  # `_literal_runs` keeps only `str` literals
                ends.append(len(joined))
            for edit in T.find_references(joined, ctx.resolver):
                # The part a rule replaces; a literal holding it whole is rewritten as a string.
                moved_end = edit.start + len(edit.resolution.first.old) if edit.fixable else 0
                if not any(edit.start < end < moved_end for end in ends[:-1]):
                    continue
                start = ctx.smap.span(run[0])[0]
                if protected.skip(start, ctx.smap.span(run[-1])[1]):
                    continue
                message = (
                    f"'{edit.old}' is built by adding string literals with '+'; it moved to "
                    f"'{edit.new}' ({F.steps_of(edit.resolution)}): write it as one literal"
                )
                out.report(F.needs_human("string", message, old=edit.old), start)
    return out.done()


def _literal_runs(operands: list[ast.expr]) -> list[list[ast.Constant]]:
    """The runs of adjacent `str` literals among the operands of a `+` chain."""
    runs: list[list[ast.Constant]] = [[]]
    for operand in operands:
        if isinstance(operand, ast.Constant) and isinstance(operand.value, str):
            runs[-1].append(operand)
        elif runs[-1]:
            runs.append([])
    return [run for run in runs if len(run) > 1]



def _open_prefixes(
    ctx: SiteContext, protected: Protected, out: SiteOutput, start: int, end: int
) -> None:
    """A literal that ends in `pkg.parent.` and is completed at run time by a format field:
    the completed name cannot be known, so it is reported when names moved below that
    parent."""
    resolver = ctx.resolver
    for match in _OPEN_PREFIX.finditer(ctx.smap.text, start, end):
        parent = match.group(1)
        if not resolver.is_ours(parent) or _migrated(resolver, parent):
            continue
        children = resolver.moved_children(parent)
        if children and not protected.skip(start, end):
            message = (
                f"'{parent}.' is completed at run time (a format field); names below it moved "
                f"({', '.join(sorted(children))})"
            )
            out.report(F.needs_human("string", message, old=parent), match.start())


def _migrated(resolver: Resolver, parent: str) -> bool:
    """Whether `parent` is what a migration writes: a new name of the table (or below one)
    that no rule moves again. Such a prefix is the result of `vam migrate`; flagging it
    would report what the tool wrote, and nothing could clear it (an intermediate rule may
    still have an old below it, which the resolver settles when the name is complete)."""
    if resolver.resolve(parent).changed:
        return False
    return any(
        is_under(parent, move.new)
        for step in resolver.steps
        for move in step.moves()
    )


def _doctest_imports(
    ctx: SiteContext, protected: Protected, out: SiteOutput, start: int, end: int, kind: str
) -> list[tuple[int, int]]:
    """Import statements in doctest lines (`>>> from m import x`) of a string literal follow
    the import rules; returns the spans they cover (the text pass skips them)."""
    covered: list[tuple[int, int]] = []
    statement_ctx = ctx.statement_context()
    import_line = import_line_rewriter(ctx)
    for match in _DOCTEST_IMPORT.finditer(ctx.smap.text, start, end):
        result = import_line(match.group(1), match.group(2), statement_ctx, kind)
        if result is None or protected.skip(match.start(), match.end()):
            continue
        lines, findings = result
        covered.append((match.start(), match.end()))
        out.findings.extend(ctx.at(f, match.start()) for f in findings)
        if lines is not None:
            # Each resulting statement is a doctest line of its own, with the same lead.
            out.edit(match.start(), match.end(), ctx.newline.join(lines))
    return covered
