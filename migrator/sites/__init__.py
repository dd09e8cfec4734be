"""One rewriter per kind of reference site in a Python module, sharing one edit buffer.

`SITE_REWRITERS` runs in order: compatibility pairs first (what they keep, no other
rewriter touches), then imports (comments on their lines are theirs), and `add_imports`
last (it commits the chain edits the others held). A new kind of site is one module here
and one entry before `add_imports`.
"""

from __future__ import annotations

from migrator.sites import calls, chains, comments, compat, imports, strings
from migrator.sites.context import SiteRewriter

SITE_REWRITERS: tuple[SiteRewriter, ...] = (
    compat.keep_pairs,
    imports.rewrite_imports,
    chains.rewrite_chains,
    strings.rewrite_strings,
    strings.rewrite_fstrings,
    strings.report_concatenations,
    calls.rewrite_calls,
    comments.rewrite_comments,
    imports.add_imports,
)
