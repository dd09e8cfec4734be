"""`vam verify-imports`: the import-only CI check.

Static mode resolves every first-party import against the package's own files, never running
them (index.py: what a module binds; project.py: star imports, suggestions; checker.py: names
and modules; cycles.py: cycles that break at import time). Dynamic mode imports each module in
a subprocess (dynamic.py). Against a third-party release (against.py) the same checker runs on
imports of that distribution, indexed from its tree, sdist or wheel; core/forwarding.py reads what a
module `__getattr__` serves. run.py ties them to the command line; output.py renders findings.
"""

from migrator.verify_imports.against import Dist, dist_from_source, load_dist, verify_against
from migrator.verify_imports.discovery import TargetError
from migrator.verify_imports.dynamic import DEFAULT_OPTIONAL, DEFAULT_TIMEOUT_S
from migrator.verify_imports.findings import CODE_TITLES, SEVERITY, ImportFinding
from migrator.verify_imports.output import FORMATS, render, summary
from migrator.verify_imports.run import (
    Settings,
    SettingsError,
    VerifyResult,
    load_settings,
    verify_dynamic,
    verify_static,
)

__all__ = [
    "CODE_TITLES",
    "DEFAULT_OPTIONAL",
    "DEFAULT_TIMEOUT_S",
    "Dist",
    "FORMATS",
    "SEVERITY",
    "ImportFinding",
    "Settings",
    "SettingsError",
    "TargetError",
    "VerifyResult",
    "dist_from_source",
    "load_dist",
    "load_settings",
    "render",
    "summary",
    "verify_against",
    "verify_dynamic",
    "verify_static",
]
