"""The bridge to `vam verify-api` (migrator.verify_api).

`verify-api` reports the breaks an import rewrite cannot fix (codes VAPnnn): an override whose
signature no longer matches the upstream method, a call with a keyword the target no longer
accepts, an attribute the upstream class no longer defines. The upgrade report files each
finding under one of the guide's failure patterns (`pattern`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from migrator.core.config import Config
from migrator.verify_api import ApiRequest, ApiResult, verify_api
from rules import Pack

OVERRIDES = "signature changes of overridden methods"
CALLS = "calls with changed parameters"
ATTRIBUTES = "moved or removed attributes"

# verify-api run on some paths, with the baseline version (None: the project's own chain).
Checker = Callable[[Sequence[str], "str | None"], Any]


def checker(target: str, pack: Pack, config: Config, guards: tuple[str, ...],
            exclude: tuple[str, ...] = ()) -> Checker:
    """verify-api against the DIST `target` (`NAME==VERSION`, a tree, an archive, `REPO@REV`)
    with the run's pack, configuration and version helpers; the result has `.findings`."""

    def run(targets: Sequence[str], baseline: str | None) -> ApiResult:
        return verify_api(ApiRequest(tuple(targets), target, pack, config, given_from=baseline,
                                     exclude=exclude, guards=guards))

    return run


def pattern(finding: Any) -> str:
    """The failure pattern a verify-api finding belongs to: its `kind` when it says one,
    else read off its message (`override`/`super()`, `attribute`, else a call)."""
    kind = str(getattr(finding, "kind", "")).lower()
    text = f"{kind} {finding.message}".lower()
    if "overrid" in text or "super()" in text or "signature" in kind:
        return OVERRIDES
    if "attribute" in text:
        return ATTRIBUTES
    return CALLS
