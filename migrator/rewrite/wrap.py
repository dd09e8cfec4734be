"""Wraps a from-import that grew past the line length, in the file's own style.

Three styles cover what black, ruff format, isort and yapf write:

    BLACK     from m import (        HANGING   from m import (      ALIGNED   from m import (a, b,
                  a,                               a, b, c)                          c)
                  b,
              )
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from migrator.rewrite.import_plan import ImportStyle


def wrap_from_import(
    node: cst.ImportFrom, style: ImportStyle, indent: int, limit: int
) -> cst.ImportFrom:
    """`node` with its names in parentheses, laid out in `style` within `limit` columns.

    `indent` is the width of the block indentation the statement sits at.
    """
    if isinstance(node.names, cst.ImportStar) or not node.names:
        return node
    names = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in node.names]
    if style is ImportStyle.BLACK:
        return _one_per_line(node, names)
    width = limit - indent
    if style is ImportStyle.HANGING:
        return _filled(node, names, first_column=None, cont=4, width=width)
    opening = opening_column(node)
    if opening + max(len(_code(n)) for n in names) + 1 > width:
        # Aligned under a long module path, the names would not fit: hang them instead.
        return _filled(node, names, first_column=None, cont=4, width=width)
    return _filled(node, names, first_column=opening, cont=opening, width=width)


def comment_on_first_line(line: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
    """`line` (a statement just wrapped) with its trailing comment moved from the end of its
    last line to the end of its first, where it was before the wrap.

    Tools read a pragma of a statement that spans lines on its first line: mypy a `# type:
    ignore[...]` (an error in an import is reported at the `from` line), ruff a `# noqa`
    (checked with ruff 0.17 and mypy: after `)` neither silences anything).
    """
    comment = line.trailing_whitespace.comment
    node = line.body[0]
    if comment is None or not isinstance(node, cst.ImportFrom):
        return line
    # The line breaks in order: after `(`, then after each comma.
    breaks: list[cst.LeftParen | cst.Comma] = []
    if isinstance(node.lpar, cst.LeftParen):
        breaks.append(node.lpar)
    if not isinstance(node.names, cst.ImportStar):
        breaks += [alias.comma for alias in node.names if isinstance(alias.comma, cst.Comma)]
    for holder in breaks:
        space = holder.whitespace_after
        if isinstance(space, cst.ParenthesizedWhitespace):
            spaced = space.with_changes(first_line=cst.TrailingWhitespace(
                whitespace=line.trailing_whitespace.whitespace, comment=comment))
            moved = holder.with_changes(whitespace_after=spaced)
            node = node.deep_replace(holder, moved)  # type: ignore[assignment, arg-type]
            return line.with_changes(
                body=[node],
                trailing_whitespace=line.trailing_whitespace.with_changes(
                    whitespace=cst.SimpleWhitespace(""), comment=None))
    return line  # still one line: the comment ends it


def opening_column(node: cst.ImportFrom) -> int:
    """The column, from the start of the statement, where its first name starts when it
    shares the line of `(` (the column an aligned layout lines the other names up under)."""
    lpar = node.lpar if isinstance(node.lpar, cst.LeftParen) else cst.LeftParen()
    if not isinstance(lpar.whitespace_after, cst.SimpleWhitespace):
        lpar = cst.LeftParen()
    probe = node.with_changes(
        names=[cst.ImportAlias(cst.Name("x"))], lpar=lpar, rpar=cst.RightParen()
    )
    return len(_code(probe)) - len("x)")


def aligned(node: cst.ImportFrom) -> bool:
    """Whether `node` is laid out in the aligned style: its first name on the line of `(`."""
    return isinstance(node.lpar, cst.LeftParen) and isinstance(
        node.lpar.whitespace_after, cst.SimpleWhitespace
    )


def reindent(node: cst.ImportFrom, column: Callable[[int], int]) -> cst.ImportFrom:
    """`node` with each continuation line (names and comment lines inside the parentheses)
    starting at `column(its current column)`."""

    class _Reindent(cst.CSTTransformer):
        def leave_ParenthesizedWhitespace(
            self, original: cst.ParenthesizedWhitespace, updated: cst.ParenthesizedWhitespace
        ) -> cst.ParenthesizedWhitespace:
            now = len(updated.last_line.value)
            if column(now) == now:
                return updated
            return updated.with_changes(last_line=cst.SimpleWhitespace(" " * column(now)))

        def leave_EmptyLine(self, original: cst.EmptyLine, updated: cst.EmptyLine) -> cst.EmptyLine:
            now = len(updated.whitespace.value)
            if column(now) == now:
                return updated
            return updated.with_changes(whitespace=cst.SimpleWhitespace(" " * column(now)))

    return node.visit(_Reindent())  # type: ignore[return-value]


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _newline_to(column: int) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(),
        indent=True,
        last_line=cst.SimpleWhitespace(" " * column),
    )


def _one_per_line(node: cst.ImportFrom, names: list[cst.ImportAlias]) -> cst.ImportFrom:
    laid = [a.with_changes(comma=cst.Comma(whitespace_after=_newline_to(4))) for a in names[:-1]]
    laid.append(names[-1].with_changes(comma=cst.Comma(whitespace_after=_newline_to(0))))
    return node.with_changes(
        names=laid,
        lpar=cst.LeftParen(whitespace_after=_newline_to(4)),
        rpar=cst.RightParen(),
    )


def _filled(
    node: cst.ImportFrom,
    names: list[cst.ImportAlias],
    first_column: int | None,
    cont: int,
    width: int,
) -> cst.ImportFrom:
    """Greedy fill: as many names per line as fit in `width` columns.

    `first_column` is where the first name starts when it shares the line of the opening
    parenthesis; None puts it on the next line. Continuation lines start at `cont`.
    """
    lines: list[list[cst.ImportAlias]] = [[]]
    column = cont if first_column is None else first_column
    for alias in names:
        size = len(_code(alias)) + 1  # the name and the comma or parenthesis after it
        if lines[-1] and column + 1 + size > width:
            lines.append([])
            column = cont
        elif lines[-1]:
            column += 1
        lines[-1].append(alias)
        column += size
    laid: list[cst.ImportAlias] = []
    for number, line in enumerate(lines):
        for index, alias in enumerate(line):
            if number == len(lines) - 1 and index == len(line) - 1:
                laid.append(alias)
            elif index == len(line) - 1:
                laid.append(alias.with_changes(comma=cst.Comma(whitespace_after=_newline_to(cont))))
            else:
                laid.append(
                    alias.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                )
    lpar = cst.LeftParen(
        whitespace_after=_newline_to(cont) if first_column is None else cst.SimpleWhitespace("")
    )
    return node.with_changes(names=laid, lpar=lpar, rpar=cst.RightParen())
