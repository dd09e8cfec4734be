"""Two parts of `--drop-compat`'s plan (`drop.py`) that read no chain of arms: the cuts that
collapse a conditional expression to its live side, and the removal of a version helper's
import that only the removed code used (what `--keep-compat` added, `lanes.py`).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from migrator.core.placement import comment_only_after
from migrator.rewrite.locator import SourceMap
from migrator.rewrite.sites.plan import Cut

# What a kept side of a conditional expression can be without parentheses anywhere.
_ATOMS = (ast.Name, ast.Attribute, ast.Constant, ast.Call, ast.Subscript)


def expression_cuts(
    smap: SourceMap, parents: Mapping[int, ast.AST], node: ast.IfExp, value: bool
) -> list[Cut]:
    """The cuts that leave the side of `node` its test `value` selects, with the parentheses
    around that side; the parentheses around `node` itself go too when they are its own and
    the side is an atom (`(x if guard else y)()` -> `y()`, as a plain migrate writes it)."""
    text = smap.text
    start, end = smap.span(node)
    kept = node.body if value else node.orelse
    own = _own_parens(smap, parents, node) if isinstance(kept, _ATOMS) else None
    cuts = []
    if value:  # keep the body, with the parentheses around it
        opened = text[start : smap.span(node.body)[0]].count("(")
        cut = smap.span(node.body)[1]
        for _ in range(opened):
            cut = text.index(")", cut) + 1
        if own and not opened:
            cuts.append(Cut(own[0], start))
            end = own[1]
        cuts.append(Cut(cut, end))
    else:  # keep the orelse side, with the parentheses around it
        closed = text[smap.span(node.orelse)[1] : end].count(")")
        cut = smap.span(node.orelse)[0]
        for _ in range(closed):
            cut = text.rindex("(", start, cut)
        if own and not closed:
            cuts.append(Cut(end, own[1]))
            start = own[0]
        cuts.append(Cut(start, cut))
    return cuts


def _own_parens(
    smap: SourceMap, parents: Mapping[int, ast.AST], node: ast.IfExp
) -> tuple[int, int] | None:
    """The span of the parentheses right around `node` when they are its own (not a call's
    or a class's); None otherwise."""
    text = smap.text
    start, end = smap.span(node)
    before = len(text[:start].rstrip(" \t")) - 1
    after = end + len(text[end:]) - len(text[end:].lstrip(" \t"))
    if before < 0 or text[before] != "(" or text[after : after + 1] != ")":
        return None
    parent = parents.get(id(node))
    if isinstance(parent, ast.ClassDef):
        return None
    if isinstance(parent, ast.Call) and node is not parent.func:
        if text.index("(", smap.span(parent.func)[1]) == before:
            return None
    return before, after + 1


def helper_import_cuts(
    smap: SourceMap, tree: ast.Module, helpers: tuple[str, ...], removed: list[tuple[int, int]]
) -> list[Cut]:
    """The cut of each top-level `from M import <helper>` whose every use lies in `removed`
    (a linter would flag it unused). An import that no code used is left alone, as is one
    that shares its line with other code."""
    if not removed:
        return []
    uses: dict[str, list[int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in helpers:
            uses.setdefault(node.id, []).append(smap.span(node)[0])
    cuts = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.ImportFrom) or len(stmt.names) != 1 or stmt.names[0].asname:
            continue
        found = uses.get(stmt.names[0].name)
        if not found or not all(any(a <= at < b for a, b in removed) for at in found):
            continue
        start, end = smap.span(stmt)
        if smap.indentation(start) != "" or comment_only_after(smap.text, end) is None:
            continue
        cuts.append(Cut(start, _next_line(smap, end)))
    return cuts


def _next_line(smap: SourceMap, offset: int) -> int:
    """The start of the line after the one holding `offset` (the end of the text)."""
    line = smap.position(offset)[0]
    return smap.starts[line] if line < len(smap.starts) else len(smap.text)
