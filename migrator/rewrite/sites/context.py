"""The shapes the three phases of the site rewriters hand each other: the module they
rewrite (`SiteContext`), what phase 1 protects (`Protected`), what a rewriter returns
(`SiteEdits`: edits, findings, and the chain edits that need an import added).

Everything here is immutable once made; `SiteOutput` is the one mutable thing, and it never
leaves the rewriter that fills it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import NamedTuple

from migrator.core import findings as F
from migrator.core.edits import NEWLINE
from migrator.core.resolver import Resolver
from migrator.core.settings import Options
from migrator.rewrite.import_plan import ImportContext, ImportStyle
from migrator.rewrite.locator import Sites, SourceMap
from migrator.rewrite.sites.plan import DropPlan

Span = tuple[int, int]


@dataclass(frozen=True)
class SiteContext:
    """One module, parsed and located.

    `package` anchors relative imports (None: they are left alone); `lines` are the lines
    that spell a moved name; `aliases` maps the local names module-level imports bind to
    dotted paths; `style` is the file's parenthesized import layout.
    """

    resolver: Resolver
    options: Options
    package: str | None
    smap: SourceMap
    tree: ast.Module
    lines: set[int]
    sites: Sites
    aliases: dict[str, str]
    style: ImportStyle

    def statement_context(self) -> ImportContext:
        """Context for an import statement written in text (a comment, a doctest line)."""
        return ImportContext(self.resolver, self.package, comments=False)

    @cached_property
    def newline(self) -> str:
        """The module's line break (its first one; `\\n` when it has none)."""
        found = NEWLINE.search(self.smap.text)
        return found.group() if found else "\n"

    def at(self, finding: F.Finding, offset: int) -> F.Finding:
        """`finding` positioned at `offset` of the text."""
        line, col = self.smap.position(offset)
        return replace(finding, path="", line=line, col=col)


@dataclass(frozen=True)
class Protected:
    """What phase 1 decided no rewriter may touch, and the plan of `--drop-compat`.

    `ignored`: the spans of the lines a `vam: ignore` pragma silences. `frozen`: spans no
    rewriter edits or reports on - the code `--drop-compat` removes, the old branches of
    version guards. `kept`: the ids of the ast nodes (statements, chains, literals) of
    compatibility pairs. `import_lines`: the lines of import statements (with a trailing
    comment), whose comments are the import rewriter's. `drops`: `--drop-compat`'s plan,
    carried out in phase 3 (None without `--drop-compat`).
    """

    ignored: tuple[Span, ...] = ()
    frozen: tuple[Span, ...] = ()
    kept: frozenset[int] = frozenset()
    import_lines: frozenset[int] = frozenset()
    drops: DropPlan | None = None

    def skip(self, start: int, end: int) -> bool:
        """Whether `text[start:end]` touches an ignored line or a frozen span."""
        return overlaps(self.frozen, start, end) or overlaps(self.ignored, start, end)

    def keeps(self, node: ast.AST) -> bool:
        """Whether `node` belongs to a compatibility pair."""
        return id(node) in self.kept


def overlaps(spans: Iterable[Span], start: int, end: int) -> bool:
    """Whether `text[start:end]` overlaps one of `spans` (an empty one: lies inside one)."""
    end = max(end, start + 1)
    return any(a < end and start < b for a, b in spans)


class Edit(NamedTuple):
    """Replace `text[start:end]` (offsets in the decoded text) with `new`."""

    start: int
    end: int
    new: str


@dataclass(frozen=True)
class SiteEdits:
    """What one rewriter returns: its edits and findings (positioned), in the order it made
    them, its held chains, and the offsets where its edits call the version helper
    (`--keep-compat`: phase 3 adds the helper's import if the module lacks it)."""

    edits: tuple[Edit, ...] = ()
    findings: tuple[F.Finding, ...] = ()
    held: tuple[HeldChain, ...] = ()
    helper_uses: tuple[int, ...] = ()


@dataclass(frozen=True)
class HeldChain:
    """A chain edit that works only with `import <new_module>` in the module: phase 3 adds
    that import next to the `import <old_module>` that made the old chain work, or reports
    the chain for a human when it cannot."""

    new_module: str
    old_module: str
    edit: Edit
    finding: F.Finding


@dataclass
class SiteOutput:
    """What one rewriter collects while it walks its sites; `done` freezes it."""

    ctx: SiteContext
    edits: list[Edit] = field(default_factory=list)
    findings: list[F.Finding] = field(default_factory=list)
    held: list[HeldChain] = field(default_factory=list)
    helper_uses: list[int] = field(default_factory=list)

    def edit(self, start: int, end: int, new: str) -> None:
        self.edits.append(Edit(start, end, new))

    def report(self, finding: F.Finding, offset: int) -> None:
        self.findings.append(self.ctx.at(finding, offset))

    def done(self) -> SiteEdits:
        return SiteEdits(
            tuple(self.edits), tuple(self.findings), tuple(self.held), tuple(self.helper_uses)
        )


# A site rewriter (phase 2): the edits and findings of one kind of site.
SiteRewriter = Callable[[SiteContext, Protected], SiteEdits]
