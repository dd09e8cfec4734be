"""Phase 3: the imports held chains and `--keep-compat`'s lanes need, `--drop-compat`'s
collapse, and the edits applied.

Edits are spans of the original text, applied once, so bytes outside them never change.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import replace

from migrator.core import findings as F
from migrator.core.edits import splice
from migrator.core.placement import insertion
from migrator.rewrite.sites.collapse import collapse
from migrator.rewrite.sites.context import (
    Edit,
    HeldChain,
    Protected,
    SiteContext,
    SiteEdits,
)
from migrator.rewrite.sites.lanes import helper_import


def finish(
    ctx: SiteContext,
    protected: Protected,
    found: Sequence[F.Finding],
    results: Sequence[SiteEdits],
) -> tuple[str, list[F.Finding]]:
    """The new text and every finding, sorted by position, from phase 1's findings (`found`)
    and the rewriters' results, in the order the rewriters ran."""
    edits = [edit for result in results for edit in result.edits]
    findings = [*found, *(f for result in results for f in result.findings)]
    added = add_imports(ctx, [chain for result in results for chain in result.held])
    edits += added.edits
    findings += added.findings
    helper = helper_import(ctx, [use for result in results for use in result.helper_uses])
    if helper is not None:  # first: it may go where a block that calls the helper starts
        edits.insert(0, helper)
    if protected.drops is not None:
        edits = collapse(ctx, protected.drops, edits)
    return apply_edits(ctx.smap.text, edits), sorted(findings, key=lambda f: (f.line, f.col))


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """`text` with `edits` made (`migrator.core.edits.splice`).

    Precedence when edits overlap (none is expected: each rewriter claims its own kind of
    site and all skip what phase 1 protects; this keeps a mistake from corrupting the
    text): edits are taken in order of their start, and at one
    start in the order `finish` lists them - the version helper's import (`--keep-compat`),
    the rewriters in `SITE_REWRITERS` order, then
    the held chains and the imports phase 3 adds, then `--drop-compat`'s cuts and
    re-indents. An edit that starts before the end of the last one taken is dropped whole;
    an insertion (an empty span) blocks nothing.
    """
    return splice(text, edits)


def add_imports(ctx: SiteContext, held: Sequence[HeldChain]) -> SiteEdits:
    """Commit the chains that reach moved symbols, adding `import new.module` after the
    `import old.module` that made the old chain work.

    The new import goes where `migrator.core.placement` puts a line after a statement: on
    its own line at the holder's indentation, exactly as conditional as the old import. A
    holder that shares its line with other code leaves no such place: those chains are
    reported for a human instead of breaking the file.
    """
    if not held:
        return SiteEdits()
    groups: dict[tuple[str, str], list[HeldChain]] = {}
    for chain in held:
        groups.setdefault((chain.new_module, chain.old_module), []).append(chain)
    present, holders = _plain_imports(ctx.tree)
    edits: list[Edit] = []
    findings: list[F.Finding] = []
    for (new, old), chains in groups.items():
        holder = holders.get(old)
        if new in present or holder is None:
            edits += [c.edit for c in chains]
            findings += [c.finding for c in chains]
            continue
        start, end = ctx.smap.span(holder)
        spot = insertion(ctx.smap.text, (start, end))
        if spot is None:
            where = f"line {ctx.smap.position(start)[0]}"
            for chain in chains:
                message = (
                    f"{chain.finding.message}; it needs `import {new}` next to `import {old}` "
                    f"({where}), which shares its line with other code"
                )
                findings.append(replace(chain.finding, code=F.NEEDS_HUMAN, message=message))
            continue
        edits += [c.edit for c in chains]
        findings += [c.finding for c in chains]
        edits.append(Edit(spot.offset, spot.offset, f"{ctx.newline}{spot.indent}import {new}"))
    return SiteEdits(tuple(edits), tuple(findings))


def _plain_imports(tree: ast.Module) -> tuple[set[str], dict[str, ast.Import]]:
    """The modules `import m` (no `as`) imports anywhere in the module, and the first
    statement that imports each."""
    present: set[str] = set()
    holders: dict[str, ast.Import] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is None:
                    present.add(alias.name)
                    holders.setdefault(alias.name, node)
    return present, holders
