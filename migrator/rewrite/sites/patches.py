"""Patch targets that name a symbol moved out of the module that looked it up.

`mock.patch("pkg.user.helper")` replaces `helper` in `pkg.user`'s namespace: where the code
under test looks it up. A symbol row says `helper` left `pkg.user` for `pkg.lib`; the string is
rewritten like any other, but a patch of `pkg.lib.helper` misses every module that imported
`helper` by name. No rewrite can know which module the test meant to reach, so each such
target is reported (info, VAM014) beside its rewrite. Module rows keep the lookup site: the
whole module moved, and its users read the name from it where it now lives.
"""

from __future__ import annotations

import ast

from migrator.core import findings as F
from migrator.core.resolver import Hit
from migrator.rewrite.sites.context import Protected, SiteContext, SiteEdits, SiteOutput

# `mock.patch`, `patch`, `mocker.patch` and `monkeypatch.setattr` take the target first.
_PATCHERS = frozenset({"patch", "setattr"})


def report_patch_targets(ctx: SiteContext, protected: Protected) -> SiteEdits:
    out = SiteOutput(ctx)
    for node in ctx.sites.calls:
        if _callee(node.func) not in _PATCHERS or not node.args:
            continue
        target = node.args[0]
        if not isinstance(target, ast.Constant) or not isinstance(target.value, str):
            continue
        resolution = ctx.resolver.resolve(target.value)
        if not any(_leaves_its_module(hit) for hit in resolution.hits):
            continue
        start, end = ctx.smap.span(target)
        if not protected.skip(start, end):
            # Where the name starts, as VAM001 says it: past the quote and any prefix.
            inside = ctx.smap.text.find(target.value, start, end)
            out.report(F.patch_target(resolution), inside if inside >= 0 else start)
    return out.done()


def _leaves_its_module(hit: Hit) -> bool:
    """A symbol row that takes the name to another module (not a rename in place)."""
    return hit.kind == "symbol" and hit.old.rpartition(".")[0] != hit.new.rpartition(".")[0]


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None
