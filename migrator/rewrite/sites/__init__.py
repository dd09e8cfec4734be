"""One rewriter per kind of reference site in a Python module, sharing one edit buffer.

`SITE_REWRITERS` runs in order: what is frozen first (the code `--drop-compat` removes, the
old branches of version guards), then compatibility pairs (what they keep, no other
rewriter touches), then imports (comments on their lines are theirs), `add_imports` (it
commits the chain edits the others held), and `--drop-compat`'s collapse last (it
re-indents around the others' edits). A new kind of site is one module here and one entry
before `add_imports`.
"""

from __future__ import annotations

from migrator.rewrite.sites import calls, chains, comments, compat, drop, guards, imports, strings
from migrator.rewrite.sites.context import SiteRewriter

SITE_REWRITERS: tuple[SiteRewriter, ...] = (
    drop.plan_drops,
    guards.freeze_old_branches,
    compat.keep_pairs,
    imports.rewrite_imports,
    chains.rewrite_chains,
    strings.rewrite_strings,
    strings.rewrite_fstrings,
    strings.report_concatenations,
    calls.rewrite_calls,
    comments.rewrite_comments,
    imports.add_imports,
    drop.collapse,
)
