"""Attribute chains headed by a table package (`vllm_ascend.a.b.c`) or a local alias of one.

A chain that reaches a moved module is rewritten in place. One that reaches a moved symbol
also needs its new module imported: its edit is returned held (`HeldChain`), and phase 3
(`finish.py`) adds the import or reports the chain.
"""

from __future__ import annotations

import ast

from migrator.core import findings as F
from migrator.rewrite.sites import lanes
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
            _alias_chain(ctx, out, protected, node, name)
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
        if lanes.splits(ctx, name):
            lanes.conditional_chain(lanes.lanes_of(ctx), out, node, resolution)
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


def _alias_chain(
    ctx: SiteContext, out: SiteOutput, protected: Protected, node: ast.Attribute, name: str
) -> None:
    """`m.sub.Name` where `m` is a local name for a module of the table.

    The chain is resolved whole (`bound.sub.Name`, every step up to `--to`), so renames a
    later step made below the module are taken in the same pass as the import's own move.
    Where the import is rewritten, `m` names the module's new path: the chain becomes `m` +
    what the whole name's new path has below it. A name that left `m`'s module for another
    one needs another import: reported for a human.
    """
    start, end = ctx.smap.span(node)
    head = name.partition(".")[0]
    bound = ctx.aliases[head]
    if not ctx.resolver.is_ours(bound):
        return
    binding = ctx.resolver.resolve(bound)
    if binding.changed and _binding_kept(ctx, protected, head):
        return  # the import stays as written, so does what it binds
    full = bound + name[len(head) :]
    resolution = ctx.resolver.resolve(full)
    if resolution.removed and not binding.removed:  # else the import says it
        out.report(F.removed("attribute", resolution), start)
    if not resolution.changed:
        return
    # A move of what `head` itself names (`from m import Cls`) is the import's own: the
    # rewritten import binds `head` to the moved object, so `Cls.ATTR` follows it.
    crossed = any(
        hit.old.rpartition(".")[0] != hit.new.rpartition(".")[0]
        for hit in resolution.hits
        if hit.kind == "symbol" and hit not in binding.hits
    )
    below = resolution.new.startswith(binding.new + ".")
    if below and not crossed and ctx.smap.text[start:end] == name:
        new = head + resolution.new[len(binding.new) :]
        if new != name and lanes.splits(ctx, full):  # VERSION still needs its own spelling
            lanes.conditional_alias(lanes.lanes_of(ctx), out, node, (bound, full), new)
        elif new != name:
            out.findings.append(ctx.at(F.moved("attribute", resolution, old=name, new=new), start))
            out.edit(start, end, new)
        return
    message = (
        f"'{name}' reaches '{full}' through the local name '{head}'; it moved to "
        f"'{resolution.new}' ({F.steps_of(resolution)})"
    )
    out.report(F.needs_human("attribute", message, old=full), start)


def _binding_kept(ctx: SiteContext, protected: Protected, head: str) -> bool:
    """Whether the module-level import that binds `head` last is protected (not rewritten)."""
    binder: ast.stmt | None = None
    for node in ctx.tree.body:
        if isinstance(node, ast.Import) and any(a.asname == head for a in node.names):
            binder = node
        elif isinstance(node, ast.ImportFrom) and any(
            (a.asname or a.name) == head for a in node.names
        ):
            binder = node
    if binder is None:
        return False
    return protected.skip(*ctx.smap.span(binder)) or protected.keeps(binder)
