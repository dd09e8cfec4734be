"""Attribute chains headed by a table package (`vllm_ascend.a.b.c`) or a local alias of one.

A chain that reaches a moved module is rewritten in place. One that reaches a moved symbol
also needs its new module imported: its edit is held for `sites.imports.add_imports`.
"""

from __future__ import annotations

from migrator.core import findings as F
from migrator.rewrite.sites.buffer import EditBuffer
from migrator.rewrite.sites.context import SiteContext


def rewrite_chains(ctx: SiteContext, buf: EditBuffer) -> None:
    for node, name in ctx.sites.chains:
        start, end = ctx.smap.span(node)
        if buf.skip(start, end) or id(node) in buf.kept:
            continue
        head = name.partition(".")[0]
        if head not in ctx.resolver.packages:
            _alias_chain(ctx, buf, start, name, head)
            continue
        resolution = ctx.resolver.resolve(name)
        if resolution.removed:
            buf.report(F.removed("attribute", resolution), start)
        if not resolution.changed:
            continue
        if ctx.smap.text[start:end] != name:
            message = (
                f"'{name}' is written with spaces or over several lines; it moved to "
                f"'{resolution.new}' ({F.steps_of(resolution)})"
            )
            buf.report(F.needs_human("attribute", message, old=name), start)
            continue
        finding = buf.at(F.moved("attribute", resolution), start)
        symbols = [hit for hit in resolution.hits if hit.kind == "symbol"]
        if not symbols:
            buf.findings.append(finding)
            buf.edit(start, end, resolution.new)
            continue
        # Held back until `add_imports` knows the new module can be imported here.
        hit = symbols[0]
        key = (hit.new.rpartition(".")[0], hit.old.rpartition(".")[0])
        buf.hold(key, start, end, resolution.new, finding)


def _alias_chain(ctx: SiteContext, buf: EditBuffer, start: int, name: str, head: str) -> None:
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
        buf.report(F.needs_human("attribute", message, old=full), start)
