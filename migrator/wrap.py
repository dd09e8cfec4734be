"""Wraps a from-import that grew past the line length, in the file's own style.

Three styles cover what black, ruff format, isort and yapf write:

    BLACK     from m import (        HANGING   from m import (      ALIGNED   from m import (a, b,
                  a,                               a, b, c)                          c)
                  b,
              )
"""

from __future__ import annotations

import libcst as cst

from migrator.imports import ImportStyle


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
    opening = len(_code(node.with_changes(names=[names[0]]))) - len(_code(names[0])) + 1
    if opening + max(len(_code(n)) for n in names) + 1 > width:
        # Aligned under a long module path, the names would not fit: hang them instead.
        return _filled(node, names, first_column=None, cont=4, width=width)
    return _filled(node, names, first_column=opening, cont=opening, width=width)


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
