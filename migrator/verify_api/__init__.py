"""`vam verify-api`: the breaks an import rewrite cannot fix, found statically — overrides of
upstream methods whose signature changed, calls with keywords or arguments the upstream
callable no longer takes, attributes the upstream class no longer defines — for a project's
code against a target release of an upstream package, compared with a baseline release.

Reads the project and the releases with `ast` only (nothing is imported); indexes only the
upstream modules the project touches (`upstream.Upstream`, cached in `migrator.core.
indexcache` under kind "verify-api"). Imports `migrator.core`, never `migrator.rewrite`.
"""

from __future__ import annotations

from migrator.verify_api.findings import (
    ApiFinding,
    new_only,
    read_baseline,
    render,
    summary,
    write_baseline,
)
from migrator.verify_api.run import ApiRequest, ApiResult, verify_api

__all__ = ["ApiFinding", "ApiRequest", "ApiResult", "new_only", "read_baseline", "render",
           "summary", "verify_api", "write_baseline"]
