"""The bridge to `vam verify-api` (migrator.verify_api).

`verify-api` reports the breaks an import rewrite cannot fix (codes VAPnnn): an override whose
signature no longer matches the upstream method, a call with a keyword the target no longer
accepts, an attribute the upstream class no longer defines. The upgrade report files each
finding under one of the guide's failure patterns by its code (`pattern`).
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
UNPROCESSED = "files vam could not process"

# verify-api run on some paths, with the baseline version (None: the project's own chain).
Checker = Callable[[Sequence[str], "str | None"], Any]


def checker(target: str, pack: Pack, config: Config, guards: tuple[str, ...],
            exclude: tuple[str, ...] = ()) -> Checker:
    """verify-api against the DIST `target` (`NAME==VERSION`, a tree, an archive, `REPO@REV`)
    with the run's pack, configuration and version helpers; the result has `.findings`."""

    def run(targets: Sequence[str], baseline: str | None) -> ApiResult:
        return verify_api(ApiRequest(tuple(targets), target, pack, config, given_from=baseline,
                                     exclude=exclude, guards=guards, from_found=True))

    return run


# Each VAP code's failure pattern (codes in migrator.verify_api.findings); every other code
# (VAP001-VAP005, VAP009, VAP100) is about an override or its super() call.
_CALLS = frozenset({"VAP006", "VAP007"})
_ATTRIBUTES = frozenset({"VAP008"})
_UNPARSED = "VAP900"


def pattern(finding: Any) -> str:
    """The failure pattern a verify-api finding belongs to, by its code: VAP006/VAP007 a
    call, VAP008 an attribute, VAP900 a file not parsed, any other (VAP001-VAP005, VAP009,
    VAP100) an override. Never read off the message, which quotes upstream signatures."""
    code = str(getattr(finding, "code", ""))
    if code == _UNPARSED:
        return UNPROCESSED
    if code in _CALLS:
        return CALLS
    if code in _ATTRIBUTES:
        return ATTRIBUTES
    return OVERRIDES
