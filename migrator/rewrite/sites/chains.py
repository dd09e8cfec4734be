"""Attribute chains headed by a table package (`vllm_ascend.a.b.c`) or a local alias of one.

A chain that reaches a moved module is rewritten in place. One that reaches a moved symbol
also needs its new module imported: its edit is returned held (`HeldChain`), and phase 3
(`finish.py`) adds the import or reports the chain.
"""

from __future__ import annotations

from migrator.core import findings as F
from migrator.rewrite.sites.context import (
    Edit,
    HeldChain,
    Protected,
    SiteContext,
    SiteEdits,
    SiteOutput,
)


def rewrite_chains(ctx: SiteContext, protected: Protected) -> SiteEdits:
    out = SiteOutput(ctx)
    for node, name in ctx.sites.chains:
        start, end = ctx.smap.span(node)
        if protected.skip(start, end) or protected.keeps(node):
            continue
        head = name.partition(".")[0]
        if head not in ctx.resolver.packages:
            _alias_chain(ctx, out, start, name, head)
            continue
        resolution = ctx.resolver.resolve(name)
        if resolution.removed:
            out.report(F.removed("attribute", resolution), start)
        if not resolution.changed:
            continue
        if ctx.smap.text[start:end] != name:
            message = (
                f"'{name}' is written with spaces or over several lines; it moved to "
                f"'{resolution.new}' ({F.steps_of(resolution)})"
            )
            out.report(F.needs_human("attribute", message, old=name), start)
            continue
        finding = ctx.at(F.moved("attribute", resolution), start)
        symbols = [hit for hit in resolution.hits if hit.kind == "symbol"]
        if not symbols:
            out.findings.append(finding)
            out.edit(start, end, resolution.new)
            continue
        hit = symbols[0]
        edit = Edit(start, end, resolution.new)
        modules = hit.new.rpartition(".")[0], hit.old.rpartition(".")[0]
        out.held.append(HeldChain(*modules, edit, finding))
    return out.done()


def _alias_chain(ctx: SiteContext, out: SiteOutput, start: int, name: str, head: str) -> None:
    """`m.moved_name` where `m` is bound to an unmoved module whose names moved."""
    bound = ctx.aliases[head]
    if not ctx.resolver.is_ours(bound) or ctx.resolver.resolve(bound).changed:
        return
    full = bound + name[len(head) :]
    resolution = ctx.resolver.resolve(full)
    if resolution.changed:
        message = (
            f"'{name}' reaches '{full}' through the local name '{head}'; it moved to "
            f"'{resolution.new}' ({F.steps_of(resolution)})"
        )
        out.report(F.needs_human("attribute", message, old=full), start)
