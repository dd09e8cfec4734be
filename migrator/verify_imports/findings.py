"""What `vam verify-imports` reports: one `Finding` per problem, with a stable code and a severity.

Codes (stable; documented in `vam verify-imports --help`):

- errors (exit 1): VAI001 a name the module does not provide, VAI002 a module that does not exist,
  VAI003 a circular import that breaks at import time, VAI004 a file that does not parse;
  dynamic mode: VAI201 the import raised, VAI202 the import timed out.
- warnings (exit 0): VAI100 name served by a module `__getattr__` (PEP 562), VAI101 name that
  cannot be checked (star import from a third-party module, `globals()` writes), VAI102 an
  unresolvable first-party import the code guards with `except ImportError`, VAI103 a name
  listed in `__all__` that the module never binds.
- info (exit 0): VAI203 module skipped in dynamic mode, an optional dependency is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass

MISSING_NAME = "VAI001"
MISSING_MODULE = "VAI002"
BROKEN_CYCLE = "VAI003"
SYNTAX_ERROR = "VAI004"
GETATTR_NAME = "VAI100"
UNKNOWN_NAME = "VAI101"
GUARDED_IMPORT = "VAI102"
ALL_ONLY_NAME = "VAI103"
IMPORT_RAISED = "VAI201"
IMPORT_TIMEOUT = "VAI202"
OPTIONAL_SKIPPED = "VAI203"

ERROR = "error"
WARNING = "warning"
INFO = "info"

SEVERITY = {
    MISSING_NAME: ERROR,
    MISSING_MODULE: ERROR,
    BROKEN_CYCLE: ERROR,
    SYNTAX_ERROR: ERROR,
    GETATTR_NAME: WARNING,
    UNKNOWN_NAME: WARNING,
    GUARDED_IMPORT: WARNING,
    ALL_ONLY_NAME: WARNING,
    IMPORT_RAISED: ERROR,
    IMPORT_TIMEOUT: ERROR,
    OPTIONAL_SKIPPED: INFO,
}

CODE_TITLES = {
    MISSING_NAME: "cannot import name: the module neither binds it nor has such a submodule",
    MISSING_MODULE: "no such first-party module, or a relative import beyond the top-level package",
    BROKEN_CYCLE: "circular import that breaks at import time (a name needed too early)",
    SYNTAX_ERROR: "file does not parse",
    GETATTR_NAME: "name served by a module-level __getattr__ (PEP 562): unknown, not checked",
    UNKNOWN_NAME: "name unknown: star import from a third-party module, globals() writes",
    GUARDED_IMPORT: "unresolvable first-party import inside try/except ImportError",
    ALL_ONLY_NAME: "name listed in __all__ but never bound in the module",
    IMPORT_RAISED: "dynamic: importing the module raised",
    IMPORT_TIMEOUT: "dynamic: importing the module did not finish within the timeout",
    OPTIONAL_SKIPPED: "dynamic: skipped, an optional third-party dependency is not installed",
}


@dataclass(frozen=True, order=True)
class Finding:
    """One problem at `path:line:col` (1-based; `path` as given to the reporter, usually relative).

    `module` is the dotted name of the module the finding is about (the imported module for
    VAI001/VAI002/VAI003, the imported module itself in dynamic mode); `name` the imported name
    when there is one; `suggestion` a dotted path that does exist, or "".
    """

    path: str
    line: int
    col: int
    code: str
    message: str
    module: str = ""
    name: str = ""
    suggestion: str = ""

    @property
    def severity(self) -> str:
        return SEVERITY[self.code]

    @property
    def is_error(self) -> bool:
        return SEVERITY[self.code] == ERROR
