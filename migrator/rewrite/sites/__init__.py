"""The site rewriters of a Python module, in three phases.

1. `protect` (`protect.py`) decides what no rewriter may touch - the code `--drop-compat`
   removes, the old branches of version guards, compatibility pairs, `vam: ignore` lines,
   the lines of import statements - and returns it as one immutable `Protected`, with
   `--drop-compat`'s plan.
2. Each rewriter in `SITE_REWRITERS` reads the module (`SiteContext`) and `Protected` and
   returns its edits and findings (`SiteEdits`), and the attribute-chain edits that need an
   import added. Rewriters never see each other's output and never import each other; what
   several share lives in modules that are not rewriters (`textual.py`, `bindings.py`,
   `versions.py`).
3. `finish` (`finish.py`) adds the imports held chains need, carries out `--drop-compat`'s
   plan around the edits (`collapse.py`), and applies the edits (the precedence of
   overlapping ones is documented on `apply_edits`).

A new kind of site is one module with a `SiteRewriter` and one entry in `SITE_REWRITERS`.
The order of the list is the order of edits and findings in the output, nothing more.
"""

from __future__ import annotations

from migrator.core import findings as F
from migrator.rewrite.sites import calls, chains, comments, imports, patches, strings
from migrator.rewrite.sites.context import SiteContext, SiteRewriter
from migrator.rewrite.sites.finish import finish
from migrator.rewrite.sites.protect import protect

SITE_REWRITERS: tuple[SiteRewriter, ...] = (
    imports.rewrite_imports,
    chains.rewrite_chains,
    strings.rewrite_strings,
    strings.rewrite_fstrings,
    strings.report_concatenations,
    calls.rewrite_calls,
    patches.report_patch_targets,
    comments.rewrite_comments,
)


def rewrite_sites(ctx: SiteContext) -> tuple[str, list[F.Finding]]:
    """The module's new text and its findings, sorted by position."""
    protected, found = protect(ctx)
    results = [rewrite(ctx, protected) for rewrite in SITE_REWRITERS]
    return finish(ctx, protected, found, results)
