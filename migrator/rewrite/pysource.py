"""Rewrites one Python module: locate reference sites with `ast`, edit them in place.

Parsing a whole module into a concrete syntax tree costs ~20x more than CPython's own
parser, and most of a module holds no reference. So the C parser locates the sites on
lines that spell a moved name - import statements, attribute chains, string literals,
f-strings, calls, comments - and each kind of site has its rewriter (`migrator.rewrite.sites`,
which runs them in phases: what is protected, the rewriters, then added imports and
`--drop-compat`'s collapse), which edits spans of the original text: imports through the
libcst `ImportTransformer` (the statement alone is parsed), everything else through the text
rewriter. Bytes outside the edited spans never change.
"""

from __future__ import annotations

import ast
import re
import warnings

from migrator.core import findings as F
from migrator.core.resolver import Resolver
from migrator.core.settings import Options
from migrator.rewrite import text as T
from migrator.rewrite.import_plan import ImportStyle, detect_style
from migrator.rewrite.locator import Locator, Sites, SourceMap, top_level_aliases
from migrator.rewrite.sites import rewrite_sites
from migrator.rewrite.sites.context import SiteContext


class PythonRewriter:
    """Rewrites one module's source text; see the module docstring.

    `trigger` matches the text of every line that may spell a moved name.
    """

    def __init__(self, resolver: Resolver, trigger: re.Pattern[str]):
        self.resolver = resolver
        self.trigger = trigger

    def rewrite(
        self, text: str, package: str | None, options: Options
    ) -> tuple[str, list[F.Finding]]:
        """(new text, findings with positions, by line and column).

        `package` anchors relative imports (None: they are left alone).

        Raises:
            SyntaxError: `text` is not valid Python (for the running interpreter).
        """
        ctx = self.context(text, package, options)
        return (text, []) if ctx is None else rewrite_sites(ctx)

    def context(self, text: str, package: str | None, options: Options) -> SiteContext | None:
        """The module parsed and located for the site rewriters; None when nothing in it
        can change (an ignored file, or no line spells a moved name and nothing is dropped).

        Raises:
            SyntaxError: `text` is not valid Python (for the running interpreter).
        """
        if T.ignores_file(text):
            return None
        smap = SourceMap(text)
        lines = {smap.position(m.start())[0] for m in self.trigger.finditer(text)}
        if not lines and options.drop_compat is None:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings of the user's code are not ours
            tree = ast.parse(text)
        aliases = top_level_aliases(tree, package)
        sites = Sites()
        if lines:  # with --drop-compat a module may hold no reference at all
            locator = Locator(lines, self.resolver.packages, aliases)
            locator.visit(tree)
            sites = locator.sites
        style = detect_style(text) if options.line_length else ImportStyle.BLACK
        return SiteContext(
            self.resolver, options, package, smap, tree, lines, sites, aliases, style
        )
