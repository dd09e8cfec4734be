"""`vam migrate --keep-compat VERSION`: what a moved reference becomes when the module must
still run on VERSION - a dual lane, as a vLLM plugin writes one by hand. Not a rewriter: the
import, chain and string rewriters ask it.

The old lane is the reference as the steps up to VERSION leave it (`old_resolver`; usually
as written), the new lane as the whole run writes it. Where the two agree (the name moved at
or before VERSION) the plain rewrite is made. Where they differ:

- an import statement becomes one block, its old lane in one branch and its new lane (the
  statements a plain migrate writes, split by destination) in the other:
  `if vllm_version_is("0.13.0"): <old> else: <new>`, or with `compat_style` "try",
  `try: <new> except ImportError: <old>`;
- a string literal that is exactly the name, or an attribute chain that reaches a moved
  module, becomes a conditional expression on the same helper;
- anything else (a name inside a longer string, a chain that needs a new import) is left as
  it is and reported for a human (VAM002): a plain rewrite would break VERSION.

The helper is the first of `Options.version_guards`; its comparison decides how the
condition reads, so that the guard reader (`versions.py`) decides it: `_is`/`_eq`/`_le`
take the old lane when true, `_gt` the new one. `--drop-compat VERSION` afterwards collapses
exactly these blocks to what a plain migrate writes (and removes the helper import added
here once nothing uses it: `drop.py`).
"""

from __future__ import annotations

import ast
import weakref
from dataclasses import dataclass
from functools import cached_property

from migrator.core import findings as F
from migrator.core.placement import IMPORTS, insertion
from migrator.core.resolver import Resolution, Resolver
from migrator.rewrite.sites.context import Edit, Protected, SiteContext, SiteOutput
from migrator.rewrite.sites.versions import comparison
from rules import is_dotted, version_key

# The resolver of the steps up to VERSION, per run resolver (None: no such step).
_OLD: weakref.WeakKeyDictionary[Resolver, dict[str, Resolver | None]] = (
    weakref.WeakKeyDictionary()
)
# The `Lanes` of the module rewritten last (`lanes_of`).
_LAST: list[Lanes] = []
# Where a conditional expression needs no parentheses of its own: the whole of an argument,
# a value assigned or returned, an element of a display.
_BARE_PARENTS = (ast.keyword, ast.Assign, ast.AnnAssign, ast.Return, ast.List, ast.Tuple,
                 ast.Set, ast.Dict, ast.Expr)


def old_resolver(ctx: SiteContext) -> Resolver | None:
    """The run's steps up to `--keep-compat` VERSION: what the old lane still gets."""
    version = ctx.options.keep_compat
    assert version is not None
    run = ctx.resolver
    cache = _OLD.setdefault(run, {})
    if version not in cache:
        low = run.from_version
        if low is not None and version_key(low) >= version_key(version):
            cache[version] = None
        else:
            written = run.to_version or run.pack.latest
            capped = Resolver(run.pack, low, version, written_to=written)
            cache[version] = capped if capped.steps else None
    return cache[version]


def old_lane(ctx: SiteContext, name: str) -> str:
    """Where `name` is on VERSION."""
    resolver = old_resolver(ctx)
    return name if resolver is None else resolver.resolve(name).new


def splits(ctx: SiteContext, name: str) -> bool:
    """Whether `name` needs two lanes: VERSION has it elsewhere than the run's target."""
    if ctx.options.keep_compat is None:
        return False
    return old_lane(ctx, name) != ctx.resolver.resolve(name).new


def lane_conflict(name: str, new: str, kind: str, version: str) -> F.Finding:
    """VAM002 for a reference the old lane still needs and no conditional can carry."""
    message = (
        f"'{name}' moved to '{new}' after {version}, which --keep-compat keeps: it cannot "
        "carry both paths here; write it through a dual-lane import, or by hand"
    )
    return F.needs_human(kind, message, old=name)


@dataclass
class Lanes:
    """The dual lanes of one module: the helper call, blocks, conditional expressions, and
    the offsets where the helper is used (its import goes above the first)."""

    ctx: SiteContext

    @property
    def helper(self) -> str:
        return self.ctx.options.version_guards[0]

    @property
    def condition(self) -> str:
        return f'{self.helper}("{self.ctx.options.keep_compat}")'

    @property
    def old_first(self) -> bool:
        """Whether the helper is true on VERSION and older (`_is`, `_le`), not after it."""
        return comparison(self.helper) != ">"

    @cached_property
    def ready(self) -> bool:
        """Whether the module can call the helper: it binds it, or its import is known."""
        return helper_module(self.ctx) is not None or binds(self.ctx.tree, self.helper)

    def not_ready(self, name: str, kind: str) -> F.Finding:
        message = (
            f"'{name}' needs two lanes (--keep-compat {self.ctx.options.keep_compat}), but "
            f"this module does not bind `{self.helper}` and no module to import it from is "
            "known: set [tool.vam] version-helper-module, or import it, or use "
            "--compat-style try"
        )
        return F.needs_human(kind, message, old=name)

    def block(self, indent: str, old: str, new: str) -> str:
        """The statement(s) `old` (VERSION's) and `new` as one dual-lane block, written where
        a statement at `indent` stood; each lane's further lines keep their own
        indentation, one level deeper."""
        unit = "\t" if "\t" in indent else "    "
        nl = self.ctx.newline

        def nested(code: str) -> str:  # its lines after the first are indented already
            return unit + code.replace(nl, nl + unit)

        if self.ctx.options.compat_style == "try":
            return (f"try:{nl}{indent}{nested(new)}{nl}{indent}except ImportError:{nl}"
                    f"{indent}{nested(old)}")
        first, second = (old, new) if self.old_first else (new, old)
        return (f"if {self.condition}:{nl}{indent}{nested(first)}{nl}{indent}else:{nl}"
                f"{indent}{nested(second)}")

    def expression(self, node: ast.expr, old: str, new: str) -> str:
        """`old if <helper>("VERSION") else new` (sides swapped for a `_gt` helper), in
        parentheses where `node`'s place needs them."""
        first, second = (old, new) if self.old_first else (new, old)
        text = f"{first} if {self.condition} else {second}"
        return text if self._bare(node) else f"({text})"

    def _bare(self, node: ast.expr) -> bool:
        parent = self._parents.get(id(node))
        if isinstance(parent, ast.Call):
            return node is not parent.func
        return isinstance(parent, _BARE_PARENTS)

    @cached_property
    def _parents(self) -> dict[int, ast.AST]:
        return {id(child): node for node in ast.walk(self.ctx.tree)
                for child in ast.iter_child_nodes(node)}


def lanes_of(ctx: SiteContext) -> Lanes:
    """The `Lanes` of the module: one per module, so its parent map is built once (the
    rewriters of a module run one after the other, in one process)."""
    if _LAST and _LAST[0].ctx is ctx:
        return _LAST[0]
    _LAST[:] = [Lanes(ctx)]
    return _LAST[0]


def helper_module(ctx: SiteContext) -> str | None:
    """Where the helper is imported from: `[tool.vam] version-helper-module`, else the
    pack's `version-helper`."""
    return ctx.options.version_helper_module or ctx.resolver.pack.version_helper or None


def binds(tree: ast.Module, name: str) -> bool:
    """Whether the module binds `name` at its top level (also inside a top-level `if` or
    `try`): an import, a definition, an assignment."""
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        stmt = pending.pop()
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.partition(".")[0]) == name for a in stmt.names):
                return True
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if stmt.name == name:
                return True
        elif isinstance(stmt, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
                return True
        elif isinstance(stmt, (ast.If, ast.Try)):
            pending += [*stmt.body, *stmt.orelse, *getattr(stmt, "finalbody", [])]
            pending += [s for h in getattr(stmt, "handlers", []) for s in h.body]
    return False


def helper_import(ctx: SiteContext, uses: list[int]) -> Edit | None:
    """The import of the helper, when the module calls it at `uses` (offsets) and does not
    bind it: below the module's imports, or above the top-level statement of the first use
    if that comes earlier (a block that replaced an import is used where it stands)."""
    helper = ctx.options.version_guards[0]
    module = helper_module(ctx)
    if not uses or module is None or binds(ctx.tree, helper):
        return None
    text, nl = ctx.smap.text, ctx.newline
    spot = insertion(text, IMPORTS, ctx.tree.body)
    offset, first = spot.offset, min(uses)
    for stmt in ctx.tree.body:
        start, end = ctx.smap.span(stmt)
        if start <= first < max(end, start + 1) and start < offset:
            offset = ctx.smap.starts[stmt.lineno - 1]
            break
    line = f"from {module} import {helper}{nl}"
    if offset == len(text) and text and not text.endswith(("\n", "\r")):
        line = nl + line.removesuffix(nl)
    return Edit(offset, offset, line)


def conditional_string(
    lane: Lanes, protected: Protected, out: SiteOutput, node: ast.Constant
) -> bool:
    """A string literal that is exactly a dotted name needing two lanes (a `mock.patch`
    target, an `import_module` argument) becomes a conditional expression of the literal
    spelled both ways; True when the literal is dealt with (edited or reported)."""
    ctx, value = lane.ctx, node.value
    if not isinstance(value, str) or not is_dotted(value) or not ctx.resolver.is_ours(value):
        return False
    resolution = ctx.resolver.resolve(value)
    start, end = ctx.smap.span(node)
    source = ctx.smap.text[start:end]
    if not resolution.changed or not splits(ctx, value) or source.count(value) != 1:
        return False
    if protected.skip(start, end):
        return True
    if not lane.ready:
        out.report(lane.not_ready(value, "string"), start)
        return True
    old, new = (source.replace(value, name) for name in (old_lane(ctx, value), resolution.new))
    out.edit(start, end, lane.expression(node, old, new))
    out.helper_uses.append(start)
    out.report(F.moved("string", resolution), start)
    return True


def conditional_chain(
    lane: Lanes, out: SiteOutput, node: ast.Attribute, resolution: Resolution
) -> None:
    """An attribute chain spelled from its package whose module moved after VERSION: a
    conditional expression of both spellings. One that needs a new import (a symbol that
    left its module), or that is assigned to, is reported."""
    ctx, name = lane.ctx, resolution.name
    start, end = ctx.smap.span(node)
    symbols = [hit for hit in resolution.hits if hit.kind == "symbol"]
    version = ctx.options.keep_compat or ""
    if symbols or not isinstance(node.ctx, ast.Load):
        out.report(lane_conflict(name, resolution.new, "attribute", version), start)
    elif not lane.ready:
        out.report(lane.not_ready(name, "attribute"), start)
    else:
        out.edit(start, end, lane.expression(node, old_lane(ctx, name), resolution.new))
        out.helper_uses.append(start)
        out.report(F.moved("attribute", resolution), start)


def conditional_alias(
    lane: Lanes, out: SiteOutput, node: ast.Attribute, paths: tuple[str, str], new: str
) -> None:
    """`m.old_name` through a local name `m` for the module `paths[0]` (the chain naming
    `paths[1]`), renamed below `m` after VERSION to `new`: a conditional expression of the
    chain as VERSION spells it below `m` and `new`. `m` must name a module VERSION has
    below the same path, else the chain is reported."""
    ctx = lane.ctx
    bound, full = paths
    start, end = ctx.smap.span(node)
    written = ctx.smap.text[start:end]
    head = written.partition(".")[0]
    old_bound, old_full = old_lane(ctx, bound), old_lane(ctx, full)
    resolution = ctx.resolver.resolve(full)
    version = ctx.options.keep_compat or ""
    if not old_full.startswith(old_bound + ".") or not isinstance(node.ctx, ast.Load):
        out.report(lane_conflict(full, resolution.new, "attribute", version), start)
    elif not lane.ready:
        out.report(lane.not_ready(written, "attribute"), start)
    else:
        old = head + old_full[len(old_bound):]
        out.edit(start, end, lane.expression(node, old, new))
        out.helper_uses.append(start)
        out.report(F.moved("attribute", resolution, old=written, new=new), start)
