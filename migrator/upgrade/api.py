"""The bridge to `vam verify-api` (migrator.verify_api), which may not be installed with this
version of vam: the upgrade runs without it and says so.

`verify-api` reports the breaks an import rewrite cannot fix (codes VAPnnn): an override whose
signature no longer matches the upstream method, a call with a keyword the target no longer
accepts, an attribute the upstream class no longer defines. The upgrade report files each
finding under one of the guide's failure patterns (`pattern`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

OVERRIDES = "signature changes of overridden methods"
CALLS = "calls with changed parameters"
ATTRIBUTES = "moved or removed attributes"

# The backend's entry point: (Dist, targets, baseline version or None) -> a result with
# `.findings` (path, line, col, code, message; optionally `kind`).
Checker = Callable[[Any, Sequence[str], "str | None"], Any]


def checker() -> Checker | None:
    """verify-api's backend function, or None when this vam has no `migrator.verify_api`."""
    try:
        module = importlib.import_module("migrator.verify_api")
    except ImportError:
        return None
    for name in ("verify_api_against", "verify_api", "verify_against"):
        function = getattr(module, name, None)
        if callable(function):
            return _adapted(function)
    return None


def _adapted(function: Callable[..., Any]) -> Checker:
    def run(dist: Any, targets: Sequence[str], baseline: str | None) -> Any:
        return function(dist, list(targets), from_version=baseline)

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
