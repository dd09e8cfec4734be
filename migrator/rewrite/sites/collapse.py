"""`--drop-compat`'s collapse (phase 3): the plan phase 1 made (`drop.py`), carried out around
the rewriters' edits."""

from __future__ import annotations

import ast
import re

from migrator.rewrite.sites.context import Edit, SiteContext
from migrator.rewrite.sites.plan import DropPlan

_INDENT = re.compile(r"[ \t]*")


def collapse(ctx: SiteContext, plan: DropPlan, theirs: list[Edit]) -> list[Edit]:
    """`theirs` (the edits made so far), then the cuts, then the new indentation of every
    kept line. The kept lines inside an edit of `theirs` (a split import's new lines) are
    re-indented in that edit's new text."""
    smap = ctx.smap

    def indentation(line: int) -> str:
        match = _INDENT.match(smap.line(line))
        found = match.group() if match else ""
        return found[plan.dedent.get(line, 0) :]

    cuts = []
    for cut in plan.cuts:
        lead = indentation(cut.indent_line) if cut.indent_line is not None else ""
        cuts.append(Edit(cut.start, cut.end, lead + cut.new))
    dedents = []
    in_strings = _string_lines(ctx.tree)
    for line, amount in sorted(plan.dedent.items()):
        start = smap.starts[line - 1]
        if amount <= 0 or line in in_strings or not smap.line(line).strip():
            continue
        if any(c.start <= start < c.end for c in plan.cuts):
            continue  # removed, or re-indented by the cut itself
        if any(e.start < start < e.end for e in theirs):
            continue  # inside another rewriter's edit: re-indented below
        width = len(_INDENT.match(smap.line(line)).group())  # type: ignore[union-attr]
        dedents.append(Edit(start, start + width, indentation(line)))
    return [*(_dedented(ctx, plan, edit) for edit in theirs), *cuts, *dedents]


def _dedented(ctx: SiteContext, plan: DropPlan, edit: Edit) -> Edit:
    """`edit` with `amount` columns less indentation on every line of its new text but the
    first, `amount` being what its line loses."""
    amount = plan.dedent.get(ctx.smap.position(edit.start)[0], 0)
    if amount <= 0 or ctx.newline not in edit.new:
        return edit
    lead = re.compile(re.escape(ctx.newline) + "([ \t]*)")
    return edit._replace(new=lead.sub(lambda m: ctx.newline + m.group(1)[amount:], edit.new))


def _string_lines(tree: ast.Module) -> set[int]:
    """Lines that start inside a multi-line string literal: their text is the string's."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Constant, ast.JoinedStr)) and node.end_lineno:
            if isinstance(node, ast.JoinedStr) or isinstance(node.value, (str, bytes)):
                lines.update(range(node.lineno + 1, node.end_lineno + 1))
    return lines
