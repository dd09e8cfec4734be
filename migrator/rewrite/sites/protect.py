"""Phase 1: what no rewriter may touch, decided once and handed on immutable.

In order, since each step reads what the steps before it protect: `--drop-compat`'s plan
(`drop.py`: what it removes), the old branches of version guards (`guards.py`: not those
inside removed code), compatibility pairs (`compat.py`: not those whose old side is
protected already). Then the lines a `vam: ignore` pragma silences and the lines of import
statements, whose comments are the import rewriter's. Links pinned to a tag or commit
inside strings and comments need nothing here: the reference search never returns them
(`migrator.rewrite.text`).
"""

from __future__ import annotations

from migrator.core import findings as F
from migrator.rewrite import text as T
from migrator.rewrite.sites.compat import compat_pairs
from migrator.rewrite.sites.context import Protected, SiteContext, Span
from migrator.rewrite.sites.drop import plan_drops
from migrator.rewrite.sites.guards import old_branches
from migrator.rewrite.sites.textual import import_span


def protect(ctx: SiteContext) -> tuple[Protected, tuple[F.Finding, ...]]:
    """What the module protects, and the findings that say so (the collapsed blocks, the
    old branches, the pairs), in that order."""
    drops, dropped = plan_drops(ctx)
    removed = drops.removed if drops is not None else ()
    old, guarded = old_branches(ctx, removed)
    frozen = (*removed, *old)
    kept, paired = compat_pairs(ctx, frozen)
    protected = Protected(_ignored(ctx), frozen, kept, _import_lines(ctx), drops)
    return protected, (*dropped, *guarded, *paired)


def _ignored(ctx: SiteContext) -> tuple[Span, ...]:
    """The spans of the lines that carry a `vam: ignore` pragma, line break included (the
    last line's span runs past the end of the text)."""
    starts, size = ctx.smap.starts, len(ctx.smap.text)
    return tuple(
        (starts[line - 1], starts[line] if line < len(starts) else size + 1)
        for line in sorted(T.ignored_lines(ctx.smap.text))
    )


def _import_lines(ctx: SiteContext) -> frozenset[int]:
    lines: set[int] = set()
    for node in ctx.sites.imports:
        start, end = import_span(ctx, node)
        lines.update(range(ctx.smap.position(start)[0], ctx.smap.position(end)[0] + 1))
    return frozenset(lines)
