"""Static check: every first-party import in a file resolves against the indexed package.

`import a.b` needs every prefix to be a module; `from m import x` needs `m` to be a module and
`x` to be a submodule of `m` or a name `m` binds (star imports expanded). Nothing is executed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from migrator.verify_imports import findings as codes
from migrator.verify_imports.discovery import EXTENSION, NAMESPACE, ModuleFile
from migrator.verify_imports.findings import Finding
from migrator.verify_imports.index import ImportedName, ImportStmt
from migrator.verify_imports.project import (
    IMPLICIT_NAMES,
    Project,
    RelativeImportError,
    resolve_from_module,
)

Show = Callable[[Path], str]

_PRAGMA = re.compile(rb"#\s*vam:\s*ignore(?:\[([A-Z0-9,\s]*)\])?")


def check_file(project: Project, target: ModuleFile, show: Show) -> list[Finding]:
    """Findings (VAI001, VAI002, VAI004, VAI1xx) for one file, `# vam: ignore` pragmas applied."""
    info = project.info_of_file(target.path)
    path = show(target.path)
    if info.syntax_error:
        line, col, message = info.syntax_error
        return [Finding(path, line, col, codes.SYNTAX_ERROR, f"cannot parse: {message}")]
    checker = _FileChecker(project, target, path, show)
    for stmt in info.imports:
        if stmt.is_from:
            checker.check_from(stmt)
        else:
            checker.check_import(stmt)
    return unsuppressed(project.source(target.path), checker.findings)


def unsuppressed(source: bytes, found: list[Finding]) -> list[Finding]:
    """Drop findings on lines carrying `# vam: ignore` (all codes) or `# vam: ignore[VAI001]`."""
    if not found or b"vam:" not in source:
        return found
    lines = source.splitlines()
    kept = []
    for finding in found:
        text = lines[finding.line - 1] if 0 < finding.line <= len(lines) else b""
        match = _PRAGMA.search(text)
        if match is None:
            kept.append(finding)
            continue
        listed = match.group(1)
        if listed is not None and finding.code.encode() not in re.split(rb"[,\s]+", listed):
            kept.append(finding)
    return kept


class _FileChecker:
    def __init__(self, project: Project, target: ModuleFile, path: str, show: Show) -> None:
        self.project = project
        self.target = target
        self.path = path
        self.show = show
        self.findings: list[Finding] = []

    def report(self, stmt: ImportStmt, line: int, col: int, code: str, message: str,
               module: str, name: str = "", suggestion: str = "") -> None:
        if stmt.guarded and codes.SEVERITY[code] == codes.ERROR:
            code = codes.GUARDED_IMPORT
            message = f"guarded by except ImportError: {message}"
        self.findings.append(Finding(self.path, line, col, code, message, module, name, suggestion))

    def missing_prefix(self, dotted: str) -> str:
        """The first prefix of `dotted` that is not a module ("" when all are)."""
        parts = dotted.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix not in self.project.modules:
                return prefix
        return ""

    def check_import(self, stmt: ImportStmt) -> None:
        for alias in stmt.names:
            if not self.project.is_first_party(alias.name):
                continue
            missing = self.missing_prefix(alias.name)
            if missing:
                message, suggestion = self.missing_module_message(missing, ())
                self.report(stmt, alias.line, alias.col, codes.MISSING_MODULE, message, missing,
                            suggestion=suggestion)

    def check_from(self, stmt: ImportStmt) -> None:
        try:
            module = resolve_from_module(stmt, self.target.name, self.target.is_package)
        except RelativeImportError as exc:
            written = "." * stmt.level + (stmt.module or "")
            self.report(stmt, stmt.line, stmt.col, codes.MISSING_MODULE,
                        f"{exc} (from {written} import ... in '{self.target.name}')", written)
            return
        if not self.project.is_first_party(module):
            return
        missing = self.missing_prefix(module)
        if missing:
            names = tuple(alias.name for alias in stmt.names)
            message, suggestion = self.missing_module_message(missing, names)
            self.report(stmt, stmt.line, stmt.col, codes.MISSING_MODULE, message, missing,
                        suggestion=suggestion)
            return
        if stmt.is_star:
            return
        for alias in stmt.names:
            self.check_name(stmt, module, alias)

    def check_name(self, stmt: ImportStmt, module: str, alias: ImportedName) -> None:
        project = self.project
        name = alias.name
        if f"{module}.{name}" in project.modules:
            return
        mod = project.modules[module]
        if mod.kind == EXTENSION:
            return  # a compiled extension: its names cannot be known without importing it
        info = project.info(module)
        if info is not None and info.syntax_error:
            return  # reported as VAI004 in that file; nothing can be said about its names
        where = self.show(mod.path)
        if mod.kind == NAMESPACE:
            detail = f"{where}/ is a namespace package with no __init__.py"
            self.report_missing_name(stmt, alias, module, detail)
            return
        assert info is not None
        ns = project.namespace(module)
        if name in ns.bindings or name in IMPLICIT_NAMES or (name == "__path__" and mod.is_package):
            return
        if name in ns.typing_names:
            if not stmt.typing_only:
                detail = f"{where} binds '{name}' only under TYPE_CHECKING"
                self.report_missing_name(stmt, alias, module, detail)
            return
        if info.has_getattr:
            self.report(stmt, alias.line, alias.col, codes.GETATTR_NAME,
                        f"'{name}' from '{module}' is unknown: {where} serves names with a "
                        "module-level __getattr__ (PEP 562)", module, name)
        elif ns.open_reason:
            self.report(stmt, alias.line, alias.col, codes.UNKNOWN_NAME,
                        f"'{name}' from '{module}' is unknown: {where} {ns.open_reason}",
                        module, name)
        elif info.all_names is not None and name in info.all_names:
            self.report(stmt, alias.line, alias.col, codes.ALL_ONLY_NAME,
                        f"'{name}' from '{module}' is listed in __all__ but {where} never binds it",
                        module, name)
        else:
            self.report_missing_name(stmt, alias, module, f"{where} defines no '{name}'")

    def report_missing_name(self, stmt: ImportStmt, alias: ImportedName, module: str,
                            detail: str) -> None:
        suggestion = self.project.suggest_name(module, alias.name, self.target.name)
        message = f"cannot import name '{alias.name}' from '{module}' ({detail})"
        if suggestion:
            message += f"; did you mean {suggestion}?"
        self.report(stmt, alias.line, alias.col, codes.MISSING_NAME, message, module, alias.name,
                    suggestion)

    def missing_module_message(self, missing: str, names: tuple[str, ...]) -> tuple[str, str]:
        project = self.project
        parent, _, last = missing.rpartition(".")
        reason = ""
        parent_mod = project.modules.get(parent)
        if parent_mod is not None:
            info = project.info(parent)
            is_name = info is not None and last in project.namespace(parent).bindings
            if not parent_mod.is_package:
                reason = f"'{parent}' is not a package"
            else:
                directory = parent_mod.path
                if parent_mod.kind != NAMESPACE:
                    directory = directory.parent  # the folder holding __init__.py
                reason = f"{self.show(directory)}/ has no {last}.py or {last}/"
            if is_name:
                reason += f"; '{last}' is a name in '{parent}': use from {parent} import {last}"
        message = f"no module named '{missing}'" + (f" ({reason})" if reason else "")
        suggestion = project.suggest_module(missing, names, self.target.name)
        if suggestion:
            message += f"; did you mean {suggestion}?"
        return message, suggestion
