"""Lays out the statements a parenthesized from-import with comments is split into, so each
comment stays with the name it annotates.

In `from m import (` ... `)` every name has a gap before it and the last one a gap before
`)`. A gap that breaks the line (`ParenthesizedWhitespace`) holds, in its first line, the
comment that ends the line of the name before it, and, in its empty lines, the comments
written on lines of their own above the name after it:

    from m import (  # about the statement     <- gap 0, first line
        # about a                              <- gap 0, empty lines
        a,  # about a                          <- gap 1, first line
        b,                                     <- (gap 2 ends the line: no comment)
    )

A resulting statement takes the gaps of its own names, so it keeps the layout the file
used: parenthesized, one name per line or packed, trailing comma or not.
"""

from __future__ import annotations

import libcst as cst

Gap = cst.BaseParenthesizableWhitespace


def name_gaps(node: cst.ImportFrom) -> list[Gap]:
    """The whitespace before each name of parenthesized `node`, then the one before `)`."""
    assert isinstance(node.lpar, cst.LeftParen) and isinstance(node.rpar, cst.RightParen)
    aliases = list(node.names)  # type: ignore[arg-type]
    gaps: list[Gap] = [node.lpar.whitespace_after]
    gaps += [_comma(alias).whitespace_after for alias in aliases[:-1]]
    last = aliases[-1].comma
    closing = last.whitespace_after if isinstance(last, cst.Comma) else node.rpar.whitespace_before
    gaps.append(closing)
    return gaps


def has_comments(gaps: list[Gap], indices: list[int], first: bool) -> bool:
    """Whether the names at `indices` (a statement's share of the original) carry comments;
    the first statement also carries the one after `(`, the one holding the last name
    those above `)`."""
    found = first and _trailing(gaps[0]) is not None
    for index in indices:
        found = found or bool(_leading(gaps[index])) or _trailing(gaps[index + 1]) is not None
    if len(gaps) - 2 in indices:
        found = found or bool(_leading(gaps[-1]))
    return found


def lay_out(
    original: cst.ImportFrom,
    gaps: list[Gap],
    statement: cst.ImportFrom,
    indices: list[int],
    first: bool,
) -> cst.ImportFrom:
    """`statement` (the names of `original` at `indices`, in order) in `original`'s layout,
    with the comments of those names."""
    opening = gaps[0] if first else _join(_bare(gaps[0]), gaps[indices[0]])
    aliases = list(statement.names)  # type: ignore[arg-type]
    laid = []
    for alias, index, following in zip(aliases, indices, indices[1:], strict=False):
        between = gaps[index + 1]
        if following != index + 1:
            between = _join(between, gaps[following])
        laid.append(alias.with_changes(comma=cst.Comma(whitespace_after=between)))
    closing = _closing(gaps, indices[-1])
    last = aliases[-1]
    rpar = original.rpar
    assert isinstance(rpar, cst.RightParen)
    magic = isinstance(list(original.names)[-1].comma, cst.Comma)  # type: ignore[arg-type]
    # A comment now ends the line of a name that was not last: its comma stays before it.
    moved_up = indices[-1] != len(gaps) - 2 and _trailing(closing) is not None
    if magic or moved_up:
        laid.append(last.with_changes(comma=cst.Comma(whitespace_after=closing)))
    else:
        laid.append(last.with_changes(comma=cst.MaybeSentinel.DEFAULT))
        rpar = rpar.with_changes(whitespace_before=closing)
    return statement.with_changes(
        names=laid, lpar=cst.LeftParen(whitespace_after=opening), rpar=rpar
    )


def _comma(alias: cst.ImportAlias) -> cst.Comma:
    assert isinstance(alias.comma, cst.Comma)
    return alias.comma


def _trailing(gap: Gap) -> cst.Comment | None:
    return gap.first_line.comment if isinstance(gap, cst.ParenthesizedWhitespace) else None


def _leading(gap: Gap) -> list[cst.EmptyLine]:
    if not isinstance(gap, cst.ParenthesizedWhitespace):
        return []
    return [line for line in gap.empty_lines if line.comment is not None]


def _bare(gap: Gap) -> Gap:
    """`gap` without its comments: the same line break (or none) and indentation."""
    if isinstance(gap, cst.ParenthesizedWhitespace):
        return gap.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
    return gap


def _join(after: Gap, before: Gap) -> Gap:
    """The gap between two names that were not neighbours: `after` followed the first one
    (its first line ends that name's line), `before` preceded the second (its comments
    and indentation start that name's line)."""
    breaks = isinstance(after, cst.ParenthesizedWhitespace)
    if isinstance(before, cst.ParenthesizedWhitespace) and (breaks or _leading(before)):
        first_line = (
            after.first_line
            if isinstance(after, cst.ParenthesizedWhitespace)
            else cst.TrailingWhitespace()
        )
        return before.with_changes(first_line=first_line)
    if isinstance(after, cst.ParenthesizedWhitespace):
        return after.with_changes(empty_lines=())
    return after


def _closing(gaps: list[Gap], last: int) -> Gap:
    """The gap before `)` of a statement whose last name is the original's name `last`."""
    close = gaps[-1]
    if last == len(gaps) - 2:
        return close
    after = gaps[last + 1]
    if _trailing(after) is not None:
        column = close.last_line if isinstance(close, cst.ParenthesizedWhitespace) else None
        return after.with_changes(  # type: ignore[union-attr]
            empty_lines=(), last_line=column or cst.SimpleWhitespace("")
        )
    return _bare(close)
