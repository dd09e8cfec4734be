"""What the site rewriters know of the module they rewrite."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from migrator.core.resolver import Resolver
from migrator.core.settings import Options
from migrator.rewrite.import_plan import ImportContext, ImportStyle
from migrator.rewrite.locator import Sites, SourceMap
from migrator.rewrite.sites.buffer import EditBuffer


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


# A site rewriter adds the edits and findings of one kind of site to the buffer.
SiteRewriter = Callable[[SiteContext, EditBuffer], None]
