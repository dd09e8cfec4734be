"""What `vam verify-imports` reports: one `ImportFinding` per problem, with a stable code and a
severity.

Codes (stable; documented in `vam verify-imports --help` and `vam rule CODE`):

- errors (exit 1): VAI001 a name the module does not provide, VAI002 a module that does not exist,
  VAI003 a circular import that breaks at import time, VAI004 a file that does not parse,
  VAI005 a folder without __init__.py inside a regular package (not in the built wheel);
  dynamic mode: VAI201 the import raised, VAI202 the import timed out.
- warnings (exit 0): VAI100 name served by a module `__getattr__` (PEP 562), VAI101 name that
  cannot be checked (star import from a third-party module, `globals()` writes), VAI102 an
  unresolvable first-party import the code guards with `except ImportError`, VAI103 a name
  listed in `__all__` that the module never binds, VAI104 a name only a deprecation
  `__getattr__` still serves (it names the new home).
- info (exit 0): VAI203 module skipped in dynamic mode, an optional dependency is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass

from migrator.core import codes
from migrator.core.codes import ERROR as ERROR
from migrator.core.codes import INFO as INFO
from migrator.core.codes import WARNING as WARNING
from migrator.core.render import Located

MISSING_NAME = "VAI001"
MISSING_MODULE = "VAI002"
BROKEN_CYCLE = "VAI003"
SYNTAX_ERROR = "VAI004"
UNPACKAGED_DIR = "VAI005"
GETATTR_NAME = "VAI100"
UNKNOWN_NAME = "VAI101"
GUARDED_IMPORT = "VAI102"
ALL_ONLY_NAME = "VAI103"
DEPRECATED_NAME = "VAI104"
IMPORT_RAISED = "VAI201"
IMPORT_TIMEOUT = "VAI202"
OPTIONAL_SKIPPED = "VAI203"

# {code: level} and {code: title}; levels, titles and docs live in migrator/core/codes/vai.py.
SEVERITY = codes.levels("VAI")
CODE_TITLES = codes.titles("VAI")


@dataclass(frozen=True, order=True)
class ImportFinding(Located):
    """One problem at `path:line:col` (fields `path, line, col, code` from `Located`; `path` as
    given to the reporter, usually relative). Findings sort by position, then code."""

    message: str
    module: str = ""
    """The dotted name of the module the finding is about: the imported module for
    VAI001/VAI002/VAI003, the imported module itself in dynamic mode."""
    name: str = ""
    """The imported name, when there is one."""
    suggestion: str = ""
    """A dotted path that does exist (a "did you mean"), or ""."""

    @property
    def severity(self) -> str:
        return SEVERITY[self.code]

    @property
    def is_error(self) -> bool:
        return SEVERITY[self.code] == ERROR
