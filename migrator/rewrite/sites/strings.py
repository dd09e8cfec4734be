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
from migrator.rewrite.sites.buffer import EditBuffer
from migrator.rewrite.sites.comments import import_line
from migrator.rewrite.sites.context import SiteContext
from rules import is_under

_DOCTEST_IMPORT = re.compile(r"(?m)^([ \t]*>>>[ \t]+)((?:from|import)[ \t][^\r\n]*)$")
# A dotted prefix completed at run time: f"pkg.{x}", "pkg.{}".format(x), "pkg.%s" % x.
_OPEN_PREFIX = re.compile(rf"(?<![A-Za-z0-9_.])({T.IDENT}(?:\.{T.IDENT})*)\.(?:\{{|%)")


def rewrite_strings(ctx: SiteContext, buf: EditBuffer) -> None:
    for node in ctx.sites.strings:
        docstring = id(node) in ctx.sites.docstrings
        if (docstring and not ctx.options.comments) or id(node) in buf.kept:
            continue
        start, end = ctx.smap.span(node)
        kind = "docstring" if docstring else "string"
        doctests = _doctest_imports(ctx, buf, start, end, kind)
        found = rewrite_text(ctx, buf, start, end, kind, skip=doctests)
        _open_prefixes(ctx, buf, start, end)
        raw = node.value
        value = raw if isinstance(raw, str) else bytes(raw).decode("latin-1")  # type: ignore[arg-type]
        for edit in T.find_references(value, ctx.resolver):
            if edit.fixable and edit.old not in found:
                message = (
                    f"'{edit.old}' is split across adjacent string literals or written with "
                    f"escapes; write '{edit.new}'"
                )
                buf.report(F.needs_human(kind, message, old=edit.old), start)


def rewrite_fstrings(ctx: SiteContext, buf: EditBuffer) -> None:
    for node in ctx.sites.fstrings:
        start, end = ctx.smap.span(node)
        rewrite_text(ctx, buf, start, end, "string")
        _open_prefixes(ctx, buf, start, end)


def report_concatenations(ctx: SiteContext, buf: EditBuffer) -> None:
    """A name built with `+` from string literals (`"pkg.parent." + "child"`, also across
    lines in parentheses) cannot be rewritten piece by piece: it is reported for a human."""
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
                if buf.skip(start, ctx.smap.span(run[-1])[1]):
                    continue
                message = (
                    f"'{edit.old}' is built by adding string literals with '+'; it moved to "
                    f"'{edit.new}' ({F.steps_of(edit.resolution)}): write it as one literal"
                )
                buf.report(F.needs_human("string", message, old=edit.old), start)


def _literal_runs(operands: list[ast.expr]) -> list[list[ast.Constant]]:
    """The runs of adjacent `str` literals among the operands of a `+` chain."""
    runs: list[list[ast.Constant]] = [[]]
    for operand in operands:
        if isinstance(operand, ast.Constant) and isinstance(operand.value, str):
            runs[-1].append(operand)
        elif runs[-1]:
            runs.append([])
    return [run for run in runs if len(run) > 1]


def rewrite_text(
    ctx: SiteContext,
    buf: EditBuffer,
    start: int,
    end: int,
    kind: str,
    skip: list[tuple[int, int]] | None = None,
) -> set[str]:
    """Text-rewrite `text[start:end]`; returns the old texts of the references found.
    References inside the `skip` spans are someone else's."""
    segment = ctx.smap.text[start:end]
    found = set()
    for edit in T.find_references(segment, ctx.resolver):
        found.add(edit.old)
        at = start + edit.start
        if skip and any(a <= at < b for a, b in skip):
            continue
        if buf.skip(at, start + edit.end):
            continue
        buf.report(F.text_finding(edit, kind), at)
        if edit.fixable:
            buf.edit(at, start + edit.end, edit.new)
    return found


def _open_prefixes(ctx: SiteContext, buf: EditBuffer, start: int, end: int) -> None:
    """A literal that ends in `pkg.parent.` and is completed at run time by a format field:
    the completed name cannot be known, so it is reported when names moved below that
    parent."""
    resolver = ctx.resolver
    for match in _OPEN_PREFIX.finditer(ctx.smap.text, start, end):
        parent = match.group(1)
        if not resolver.is_ours(parent) or _migrated(resolver, parent):
            continue
        children = resolver.moved_children(parent)
        if children and not buf.skip(start, end):
            message = (
                f"'{parent}.' is completed at run time (a format field); names below it moved "
                f"({', '.join(sorted(children))})"
            )
            buf.report(F.needs_human("string", message, old=parent), match.start())


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
    ctx: SiteContext, buf: EditBuffer, start: int, end: int, kind: str
) -> list[tuple[int, int]]:
    """Import statements in doctest lines (`>>> from m import x`) of a string literal follow
    the import rules; returns the spans they cover (the text pass skips them)."""
    covered: list[tuple[int, int]] = []
    statement_ctx = ctx.statement_context()
    for match in _DOCTEST_IMPORT.finditer(ctx.smap.text, start, end):
        result = import_line(match.group(1), match.group(2), statement_ctx, kind)
        if result is None or buf.skip(match.start(), match.end()):
            continue
        lines, findings = result
        covered.append((match.start(), match.end()))
        buf.findings.extend(buf.at(f, match.start()) for f in findings)
        if lines is not None:
            # Each resulting statement is a doctest line of its own, with the same lead.
            buf.edit(match.start(), match.end(), buf.newline.join(lines))
    return covered
