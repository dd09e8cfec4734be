"""`vam migrate --drop-compat VERSION`: collapse every compatibility block of VERSION or older
to the branch that still runs - what a plugin's "drop 0.11.0 support" commit does by hand.

An `if`/`elif`/`else` chain loses the arms whose guard (`versions.py`) is False on every
version after VERSION; an arm that is True there becomes the chain's `else` (or, first, the
whole statement). A chain left with one block is replaced by that block, dedented; one left
with nothing is deleted (`pass` where its block would be empty). A conditional expression
keeps its live side; a `try`/`except ImportError` pair (`compat.py`) keeps the branch with
the new path when its `except` branch imports old paths that moved in steps after VERSION (up
to `--to`), or when its `try` branch does and they moved in the first step after VERSION.
Comments and layout of what is kept stay; lines inside multi-line strings are never
re-indented. A condition a dropped guard cannot decide (`vllm_version_is("0.11.0") or flag`)
is reported for a human.

It takes two phases: `plan_drops` is part of phase 1 and protects what will be removed (no
rewriter edits or reports it); `collapse.py` carries the plan out in phase 3, re-indenting
the kept lines around the edits the rewriters made in them.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from types import MappingProxyType

from migrator.core import findings as F
from migrator.rewrite.sites.bindings import bindings, catches_import_error
from migrator.rewrite.sites.context import SiteContext, overlaps
from migrator.rewrite.sites.dropped import expression_cuts, helper_import_cuts
from migrator.rewrite.sites.plan import Cut, DropPlan
from migrator.rewrite.sites.versions import Floor, decide, mentions_decided_guard

_ELSE = re.compile(r"(?m)^[ \t]*else[ \t]*:")
_INDENT = re.compile(r"[ \t]*")


@dataclass
class _Chain:
    """An `if` statement with its `elif` arms and their values above the floor."""

    arms: list[ast.If]
    values: list[bool | None]
    orelse: list[ast.stmt]

    @property
    def vanishes(self) -> bool:
        return all(v is False for v in self.values) and not self.orelse


def plan_drops(ctx: SiteContext) -> tuple[DropPlan | None, tuple[F.Finding, ...]]:
    """The plan of `--drop-compat` for the module and its findings (None without it)."""
    if ctx.options.drop_compat is None:
        return None, ()
    planner = _Planner(ctx, Floor(ctx.options.drop_compat, inclusive=False))
    planner.run()
    plan = DropPlan(planner.floor, tuple(planner.cuts), MappingProxyType(planner.dedent))
    return plan, tuple(planner.findings)


class _Planner:
    """One walk of the module: the cuts, the dedents and the findings of `--drop-compat`,
    which `plan_drops` freezes into a `DropPlan`."""

    def __init__(self, ctx: SiteContext, floor: Floor):
        self.ctx, self.smap, self.floor = ctx, ctx.smap, floor
        self.cuts: list[Cut] = []
        self.dedent: dict[int, int] = {}
        self.findings: list[F.Finding] = []
        self.helpers = ctx.options.version_guards
        self.parents = {
            id(child): node for node in ast.walk(ctx.tree) for child in ast.iter_child_nodes(node)
        }

    def run(self) -> None:
        chains: dict[int, _Chain] = {}
        elifs: set[int] = set()
        parents: dict[int, list[ast.stmt]] = {}
        for node in ast.walk(self.ctx.tree):  # breadth first: a chain's head before its arms
            for block in _blocks(node):
                parents.update((id(stmt), block) for stmt in block)
            if isinstance(node, ast.If) and id(node) not in elifs:
                chain = self._chain(node)
                elifs.update(id(arm) for arm in chain.arms[1:])
                chains[id(node)] = chain
        for node in ast.walk(self.ctx.tree):
            if not isinstance(node, (ast.If, ast.IfExp, ast.Try)):
                continue
            if overlaps(((c.start, c.end) for c in self.cuts), *self.smap.span(node)):
                continue  # inside code that is removed
            if isinstance(node, ast.If) and id(node) in chains:
                chain = chains[id(node)]
                siblings = parents.get(id(node), [])
                self._emit_chain(chain, self._needs_pass(node, siblings, chains))
            elif isinstance(node, ast.IfExp):
                self._emit_expression(node)
            elif isinstance(node, ast.Try):
                self._emit_try(node)
        removed = [(cut.start, cut.end) for cut in self.cuts]
        self.cuts += helper_import_cuts(self.smap, self.ctx.tree, self.helpers, removed)

    def _chain(self, head: ast.If) -> _Chain:
        arms = [head]
        while (
            len(arms[-1].orelse) == 1
            and isinstance(arms[-1].orelse[0], ast.If)
            and self.smap.text.startswith("elif", self.smap.span(arms[-1].orelse[0])[0])
        ):
            arms.append(arms[-1].orelse[0])  # type: ignore[arg-type]
        values = [decide(arm.test, self.helpers, self.floor) for arm in arms]
        return _Chain(arms, values, arms[-1].orelse)

    def _needs_pass(
        self, node: ast.If, siblings: list[ast.stmt], chains: dict[int, _Chain]
    ) -> bool:
        """Whether deleting `node` would empty its block: the first of the siblings gets
        `pass` (a module may be empty)."""
        if not siblings or siblings is self.ctx.tree.body or siblings[0] is not node:
            return False
        return all(id(s) in chains and chains[id(s)].vanishes for s in siblings)

    def _emit_chain(self, chain: _Chain, needs_pass: bool) -> None:
        for arm, value in zip(chain.arms, chain.values, strict=True):
            if value is None and mentions_decided_guard(arm.test, self.helpers, self.floor):
                condition = ast.get_source_segment(self.smap.text, arm.test)
                message = (
                    f"`{condition}` names a version at or before {self.floor.version} but "
                    "also depends on other things: simplify it by hand"
                )
                self.report(F.needs_human("branch", message), arm)
        if all(v is None for v in chain.values):
            return
        live: list[ast.If] = []
        final: list[ast.stmt] = chain.orelse
        final_arm: ast.If | None = None
        for arm, value in zip(chain.arms, chain.values, strict=True):
            if value is None:
                live.append(arm)
            elif value:
                final, final_arm = arm.body, arm
                break
        if live:
            self._prune_arms(chain, live, final_arm)
        else:
            self._replace_statement(chain, final, final_arm, needs_pass)
        self._report(chain.arms[0], "the chain's live arms" if live else "its live branch")

    def _replace_statement(
        self, chain: _Chain, final: list[ast.stmt], final_arm: ast.If | None, needs_pass: bool
    ) -> None:
        head = chain.arms[0]
        start, node_end = self.smap.span(head)
        start = self._line_start(start)
        if not final:
            if needs_pass:
                self._cut(Cut(start, self.smap.line_end(node_end), "pass", head.lineno))
            else:
                self._cut(Cut(start, self._next_line(node_end)))
            return
        colon = self._header_end(final_arm) if final_arm else self._else_end(chain)
        self._keep_block(start, colon, final, node_end, head.lineno)

    def _keep_block(
        self, start: int, colon: int, block: list[ast.stmt], node_end: int, head_line: int
    ) -> None:
        """Replace the statement from `start` (its line start) to `node_end` by `block`, whose
        header ends at `colon`, dedented to the statement's indentation (`head_line`'s)."""
        body_start = self.smap.span(block[0])[0]
        if self.smap.position(body_start)[0] == self.smap.position(colon)[0]:
            self._cut(Cut(start, body_start, "", head_line))  # `else: x` on one line
        else:
            body_start = self._next_line(colon)
            self._cut(Cut(start, body_start))
            amount = len(self._indentation(block[0].lineno)) - len(self._indentation(head_line))
            for line in range(self.smap.position(body_start)[0], (block[-1].end_lineno or 0) + 1):
                self.dedent[line] = self.dedent.get(line, 0) + amount
        body_end = self.smap.line_end(self.smap.span(block[-1])[1])
        if body_end < self.smap.line_end(node_end):
            self._cut(Cut(body_end, self.smap.line_end(node_end)))

    def _emit_try(self, node: ast.Try) -> None:
        """A `try`/`except ImportError` pair whose old paths serve only the floor's release
        (`_old_side`) keeps the branch with the new path."""
        if node.orelse or node.finalbody or len(node.handlers) != 1:
            return
        handler = node.handlers[0]
        if not catches_import_error(handler):
            return
        old = self._old_side(node.body, handler.body)
        if old is None:
            return
        start, node_end = self.smap.span(node)
        if old == "body":
            colon = self.smap.text.index(":", self.smap.span(handler.type)[1]) + 1  # type: ignore[arg-type]
            self._keep_block(self._line_start(start), colon, handler.body, node_end, node.lineno)
        else:
            colon = self.smap.text.index(":", start) + 1
            self._keep_block(self._line_start(start), colon, node.body, node_end, node.lineno)
        condition = "except ImportError"
        message = (
            f"the `{condition}` pair imports a path that moved after {self.floor.version}: "
            "collapsed to the branch with the new path"
        )
        self.report(F.Finding("", 0, 0, F.COMPAT_DROPPED, "branch", message), node)

    def _old_side(self, body: list[ast.stmt], fallback: list[ast.stmt]) -> str | None:
        """"body" or "fallback": the branch that binds old paths (every pair agreeing), when
        each old path moved in a step after the floor that the pair serves; else None.

        A fallback to old paths (`try: <new>` / `except ImportError: <old>`, what
        `--keep-compat VERSION --compat-style try` writes) serves the floor's release: its
        moves may lie in any step after the floor up to `--to`. A `try` that prefers old paths
        runs them wherever they still exist, so it is dropped only for moves of the first
        step after the floor."""
        resolver = self.ctx.resolver
        later = [s.version for s in resolver.pack.steps if not self.floor.excludes(s.version)]
        if not later:
            return None
        sides = set()
        theirs = bindings(self.ctx, fallback)
        for name, (_, path, new, _) in bindings(self.ctx, body).items():
            other = theirs.get(name)
            if other is None or other[2] != new or other[1] == path:
                continue
            old, side = (path, "body") if path != new else (other[1], "fallback")
            steps = {hit.step for hit in resolver.resolve(old).hits}
            served = set(later) if side == "fallback" else {later[0]}
            if not steps or not steps <= served:
                return None
            sides.add(side)
        return sides.pop() if len(sides) == 1 else None

    def _prune_arms(self, chain: _Chain, live: list[ast.If], final_arm: ast.If | None) -> None:
        arms, node_end = chain.arms, self.smap.span(chain.arms[0])[1]
        for i, (arm, value) in enumerate(zip(arms, chain.values, strict=True)):
            if arm is final_arm:
                break
            if value is False:
                if i + 1 < len(arms):
                    end = self._line_start(self.smap.span(arms[i + 1])[0])
                elif chain.orelse:
                    end = self._line_start(self._else_end(chain))
                else:
                    end = self._next_line(node_end)
                self._cut(Cut(self._line_start(self.smap.span(arm)[0]), end))
        if live[0] is not arms[0]:
            keyword = self.smap.span(live[0])[0]
            self._cut(Cut(keyword, keyword + len("elif"), "if"))
        if final_arm is not None:
            keyword = self.smap.span(final_arm)[0]
            self._cut(Cut(keyword, self._header_end(final_arm), "else:"))
            body_end = self.smap.line_end(self.smap.span(final_arm.body[-1])[1])
            if body_end < self.smap.line_end(node_end):
                self._cut(Cut(body_end, self.smap.line_end(node_end)))

    def _emit_expression(self, node: ast.IfExp) -> None:
        value = decide(node.test, self.helpers, self.floor)
        if value is None:
            return
        self.cuts += expression_cuts(self.smap, self.parents, node, value)
        self._report(node, "its live side")

    def _report(self, node: ast.expr | ast.stmt, kept: str) -> None:
        condition = ast.get_source_segment(self.smap.text, node.test)  # type: ignore[union-attr]
        message = (
            f"`{condition}` is decided on every version after {self.floor.version}: "
            f"collapsed to {kept}"
        )
        self.report(F.Finding("", 0, 0, F.COMPAT_DROPPED, "branch", message), node)

    def report(self, finding: F.Finding, node: ast.expr | ast.stmt) -> None:
        self.findings.append(self.ctx.at(finding, self.smap.span(node)[0]))

    # -- offsets ----------------------------------------------------------------------------

    def _cut(self, cut: Cut) -> None:
        self.cuts.append(cut)

    def _line_start(self, offset: int) -> int:
        return self.smap.starts[self.smap.position(offset)[0] - 1]

    def _next_line(self, offset: int) -> int:
        """The start of the line after the one holding `offset` (the end of the text)."""
        line = self.smap.position(offset)[0]
        return self.smap.starts[line] if line < len(self.smap.starts) else len(self.smap.text)

    def _indentation(self, line: int) -> str:
        match = _INDENT.match(self.smap.line(line))
        return match.group() if match else ""

    def _header_end(self, arm: ast.If) -> int:
        """The offset after the colon that ends `arm`'s header."""
        return self.smap.text.index(":", self.smap.span(arm.test)[1]) + 1

    def _else_end(self, chain: _Chain) -> int:
        """The offset after the colon of the chain's `else:`."""
        after = self.smap.span(chain.arms[-1].body[-1])[1]
        before = self.smap.span(chain.orelse[0])[0]
        match = _ELSE.search(self.smap.text, after, before)
        assert match is not None, "an else block follows its keyword"
        return match.end()


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    """The statement lists directly inside `node`."""
    found = [getattr(node, name, None) for name in ("body", "orelse", "finalbody")]
    found += [h.body for h in getattr(node, "handlers", [])]
    return [b for b in found if isinstance(b, list) and b and isinstance(b[0], ast.stmt)]

