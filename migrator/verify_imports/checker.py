"""Static check: every first-party import in a file resolves against the indexed package.

`import a.b` needs every prefix to be a module; `from m import x` needs `m` to be a module and
`x` to be a submodule of `m` or a name `m` binds (star imports expanded). Nothing is executed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from migrator.core.forwarding import Served
from migrator.core.modname import RelativeImportError
from migrator.verify_imports import findings as codes
from migrator.verify_imports.discovery import EXTENSION, NAMESPACE, SOURCE, ModuleFile
from migrator.verify_imports.findings import ImportFinding
from migrator.verify_imports.index import ImportedName, ImportStmt
from migrator.verify_imports.project import IMPLICIT_NAMES, Project, resolve_from_module

Show = Callable[[Path], str]

# How a suggestion found by name alone is labelled: a move table's answer is said as such.
GUESS = "(a guess: same name elsewhere)"

_PRAGMA = re.compile(rb"#\s*vam:\s*ignore(?:\[([A-Z0-9,\s]*)\])?")


def check_file(project: Project, target: ModuleFile, show: Show) -> list[ImportFinding]:
    """Findings (VAI001, VAI002, VAI004, VAI1xx) for one file, `# vam: ignore` pragmas applied."""
    info = project.info_of_file(target.path)
    path = show(target.path)
    if info.syntax_error:
        line, col, message = info.syntax_error
        return [ImportFinding(path, line, col, codes.SYNTAX_ERROR, f"cannot parse: {message}")]
    checker = _FileChecker(project, target, path, show)
    for stmt in info.imports:
        if stmt.is_from:
            checker.check_from(stmt)
        else:
            checker.check_import(stmt)
    return unsuppressed(project.source(target.path), checker.findings)


def check_dotted(project: Project, target: ModuleFile, dotted: str, line: int, col: int,
                 show: Show) -> list[ImportFinding]:
    """Findings for a first-party path written as a string in `target` (a `mock.patch` target,
    a qualname): as `from P import N` where P is the longest prefix of `dotted` that is a
    module and N the next component (what mock.patch imports, then looks up); attributes
    beyond N are not checked. Messages start with the string itself. `top.name` alone, with
    no such submodule, is skipped: that is how torch custom ops are named (`vllm.mla_forward`
    in a list of graph-splitting ops), not a path."""
    parts = dotted.split(".")
    cut = max((i for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in project.modules),
              default=0)
    if cut == len(parts) or not project.is_first_party(dotted) or (cut, len(parts)) == (1, 2):
        return []
    checker = _FileChecker(project, target, show(target.path), show)
    if cut == 0:
        stmt = ImportStmt(False, None, 0, (ImportedName(dotted, None, line, col),), line, col,
                          None, False, False)
        checker.check_import(stmt)
    else:
        stmt = ImportStmt(True, ".".join(parts[:cut]), 0,
                          (ImportedName(parts[cut], None, line, col),), line, col, None, False,
                          False)
        checker.check_from(stmt)
    return [dataclasses.replace(f, message=f"string '{dotted}': {f.message}")
            for f in checker.findings]


def resolves(project: Project, target: ModuleFile, stmt: ImportStmt) -> bool:
    """Whether `stmt` (an import of `target`) runs without error: no error finding, an
    `except ImportError` around it set aside (VAI102 is an error it catches)."""
    checker = _FileChecker(project, target, "", str)
    plain = dataclasses.replace(stmt, guarded=False)
    (checker.check_from if stmt.is_from else checker.check_import)(plain)
    return not any(f.is_error for f in checker.findings)


def folder_findings(project: Project, checked: Iterable[Path], show: Show) -> list[ImportFinding]:
    """VAI005 at each left-out folder (see unpackaged.py) that a module outside it imports, when
    the run checks one of those importers or a file below the folder (`checked`: every file
    the run reports on, in any layout). Position: the folder, line 1, column 1."""
    unpackaged = project.unpackaged
    if not unpackaged.dirs:
        return []
    checked = list(checked)
    targets = {target.name for target in project.layout.targets}
    found = []
    for folder, importers in sorted(_folder_importers(project).items()):
        path = unpackaged.dirs[folder].path
        if importers & targets or any(p.is_relative_to(path) for p in checked):
            where = show(path)
            found.append(ImportFinding(
                where, 1, 1, codes.UNPACKAGED_DIR,
                f"{where}/ has no __init__.py but '{folder.rpartition('.')[0]}' is a regular "
                f"package: {unpackaged.finder} leaves it and everything below it out of the wheel",
                folder))
    return found


def _folder_importers(project: Project) -> dict[str, set[str]]:
    """{left-out folder: first-party modules outside it that import from it}."""
    unpackaged = project.unpackaged
    importers: dict[str, set[str]] = {}
    for name, mod in project.modules.items():
        info = project.info(name) if mod.kind == SOURCE else None
        if info is None:
            continue
        home = unpackaged.outermost(name)
        for stmt in info.imports:
            for imported in _imported_modules(stmt, name, mod.is_package):
                folder = unpackaged.outermost(imported)
                if folder and folder != home:
                    importers.setdefault(folder, set()).add(name)
    return importers


def _imported_modules(stmt: ImportStmt, module: str, is_package: bool) -> list[str]:
    """The dotted names a statement may import: `import a.b` -> a.b; `from m import x` -> m and
    m.x (x may be a submodule)."""
    if not stmt.is_from:
        return [alias.name for alias in stmt.names]
    try:
        source = resolve_from_module(stmt, module, is_package)
    except RelativeImportError:
        return []
    return [source, *(f"{source}.{alias.name}" for alias in stmt.names)]


def unsuppressed(source: bytes, found: list[ImportFinding]) -> list[ImportFinding]:
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
        self.findings: list[ImportFinding] = []

    def report(self, stmt: ImportStmt, line: int, col: int, code: str, message: str,
               module: str, name: str = "", suggestion: str = "") -> None:
        if stmt.guarded and codes.SEVERITY[code] == codes.ERROR:
            code = codes.GUARDED_IMPORT
            message = f"guarded by except ImportError: {message}"
        self.findings.append(
            ImportFinding(self.path, line, col, code, message, module, name, suggestion)
        )

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
                message, suggestion = self.missing_module_message(missing, (), alias.name)
                self.report(stmt, alias.line, alias.col, codes.MISSING_MODULE, message, missing,
                            suggestion=suggestion)
            else:
                self.check_packaged(stmt, alias.line, alias.col, alias.name)

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
            message, suggestion = self.missing_module_message(missing, names, module)
            self.report(stmt, stmt.line, stmt.col, codes.MISSING_MODULE, message, missing,
                        suggestion=suggestion)
            return
        # A statement from a left-out module is reported once; else each left-out submodule.
        if not self.check_packaged(stmt, stmt.line, stmt.col, module) and not stmt.is_star:
            for alias in stmt.names:
                if f"{module}.{alias.name}" in self.project.modules:
                    self.check_packaged(stmt, alias.line, alias.col, f"{module}.{alias.name}")
        if stmt.is_star:
            return
        for alias in stmt.names:
            self.check_name(stmt, module, alias)

    def check_packaged(self, stmt: ImportStmt, line: int, col: int, module: str) -> bool:
        """VAI005 when `module` lies in a folder the wheel leaves out; whether it does."""
        unpackaged = self.project.unpackaged
        folder = unpackaged.outermost(module)
        if not folder or unpackaged.outermost(self.target.name) == folder:
            return False  # an import inside the left-out folder: the folder finding says it
        where = self.show(unpackaged.dirs[folder].path)
        self.report(stmt, line, col, codes.UNPACKAGED_DIR,
                    f"'{module}' is not in the wheel: {where}/ has no __init__.py (add one, or "
                    "declare namespace packages: find_namespace_packages())", folder)
        return True

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
        served_by = project.getattr_of(module) if info.has_getattr else None
        served = served_by.served.get(name) if served_by is not None else None
        if served is not None and (served.deprecated or served.target):
            self.report_served(stmt, alias, module, served)
            return
        # A __getattr__ that raises AttributeError for every name it does not list serves
        # nothing more: an unlisted name is as missing as in a module without one.
        lazy = info.has_getattr and not (served is None and served_by is not None
                                         and served_by.closed)
        if name in ns.typing_names:
            if stmt.typing_only:
                return
            detail = f"{where} binds '{name}' only under TYPE_CHECKING or in a bare annotation"
            if lazy:  # PEP 562 lazy import: typed statically, served at run time
                self.report(stmt, alias.line, alias.col, codes.GETATTR_NAME,
                            f"'{name}' from '{module}' is unknown at run time: {detail}, and "
                            "it serves names with a module-level __getattr__ (PEP 562)",
                            module, name)
            else:
                self.report_missing_name(stmt, alias, module, detail)
            return
        if lazy:
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

    def report_served(self, stmt: ImportStmt, alias: ImportedName, module: str,
                      served: Served) -> None:
        """VAI104 for a name a deprecation `__getattr__` forwards; nothing for a lazy import
        from a named module."""
        if not served.deprecated:
            return
        where = self.show(self.project.modules[module].path)
        home = f"import it from '{served.target.rpartition('.')[0]}'" if served.target \
            else "its new home is not named in the source"
        self.report(stmt, alias.line, alias.col, codes.DEPRECATED_NAME,
                    f"'{alias.name}' from '{module}' is deprecated: only the module __getattr__ "
                    f"in {where} still serves it, with a DeprecationWarning; {home}",
                    module, alias.name, served.target)

    def report_missing_name(self, stmt: ImportStmt, alias: ImportedName, module: str,
                            detail: str) -> None:
        message = f"cannot import name '{alias.name}' from '{module}' ({detail})"
        hint, suggestion = self.table_hint(f"{module}.{alias.name}", module=False)
        if not hint:
            suggestion = self.project.suggest_name(module, alias.name, self.target.name)
            hint = f"did you mean {suggestion}? {GUESS}" if suggestion else ""
        if hint:
            message += f"; {hint}"
        self.report(stmt, alias.line, alias.col, codes.MISSING_NAME, message, module, alias.name,
                    suggestion)

    def table_hint(self, dotted: str, module: bool) -> tuple[str, str]:
        """(the move table's clause, its target) for a path this release lacks; ("", "") when
        no table names it, or names a target this release does not have either."""
        tables = self.project.moves
        answer = tables.answer(dotted, module) if tables is not None else None
        if answer is None:
            return "", ""
        if answer.removed:
            return answer.text(), ""
        if not self.exists(answer.new):
            return "", ""
        return answer.text(), answer.new

    def module_table_hint(self, full: str, names: tuple[str, ...]) -> tuple[str, str]:
        """`table_hint` for the module `full` of `from full import names`; when the table
        moves no module there (a package it removed, say), the moves of the names imported
        from it (its submodules that moved on their own)."""
        hint, suggestion = self.table_hint(full, module=True)
        if suggestion:
            return hint, suggestion
        moved = [found for found in (self.table_hint(f"{full}.{name}", module=False)
                                     for name in names if name != "*") if found[1]]
        if moved:
            return "; ".join(clause for clause, _ in moved), moved[0][1]
        return hint, suggestion

    def exists(self, dotted: str) -> bool:
        """Whether `dotted` is a module, or a name its module binds."""
        project = self.project
        if dotted in project.modules:
            return True
        module, _, name = dotted.rpartition(".")
        if module not in project.modules or project.info(module) is None:
            return False
        return name in project.namespace(module).bindings

    def missing_module_message(self, missing: str, names: tuple[str, ...],
                               full: str) -> tuple[str, str]:
        """The VAI002 message for `missing`, the first absent prefix of the imported module
        `full`, and the suggested path ("" when none)."""
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
        hint, suggestion = self.module_table_hint(full, names)
        if not hint:
            suggestion = project.suggest_module(missing, names, self.target.name)
            hint = f"did you mean {suggestion}? {GUESS}" if suggestion else ""
        if hint:
            message += f"; {hint}"
        return message, suggestion
