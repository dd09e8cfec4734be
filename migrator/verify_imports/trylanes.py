"""The fallback of an import lane that succeeds: in `try: <imports> except ImportError:
<fallback>` (what `vam migrate --keep-compat --compat-style try` writes), the handler never
runs at a release where every import of the `try` body resolves, so `verify-imports
--against` reads none of it there. When an import of the body fails the handler runs and is
checked; a body that cannot be decided (anything but imports of the distribution and
constant assignments, a relative import, no import at all) leaves its handler checked too.
"""

from __future__ import annotations

import ast

from migrator.core.guards import Span
from migrator.verify_imports.checker import resolves
from migrator.verify_imports.discovery import ModuleFile
from migrator.verify_imports.index import ImportStmt
from migrator.verify_imports.project import Project

_CAUGHT = frozenset({"ImportError", "ModuleNotFoundError"})


def dead_fallbacks(project: Project, target: ModuleFile) -> list[Span]:
    """Where the `except ImportError` handlers of `target` that the distribution indexed as
    `project` never enters begin and end (see `migrator.core.guards.dead_spans`)."""
    try:
        tree = ast.parse(project.source(target.path))
    except (SyntaxError, ValueError):
        return []
    stmts = {(s.line, s.col): s for s in project.info_of_file(target.path).imports}
    spans: list[Span] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and _body_resolves(project, target, node.body, stmts):
            spans += [((h.lineno, h.col_offset), (h.end_lineno or h.lineno, h.end_col_offset or 0))
                      for h in node.handlers if _catches_import_error(h)]
    return spans


def _body_resolves(project: Project, target: ModuleFile, body: list[ast.stmt],
                   stmts: dict[tuple[int, int], ImportStmt]) -> bool:
    """True when `body` is decided to run without ImportError: only imports of the
    distribution, each resolving, and inert statements; False otherwise, undecided included."""
    imports = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            stmt = stmts.get((node.lineno, node.col_offset + 1))
            if stmt is None or not _of_dist(project, stmt):
                return False
            imports.append(stmt)
        elif not _inert(node):
            return False
    return bool(imports) and all(resolves(project, target, stmt) for stmt in imports)


def _of_dist(project: Project, stmt: ImportStmt) -> bool:
    if stmt.level:
        return False
    modules = [stmt.module or ""] if stmt.is_from else [a.name for a in stmt.names]
    return all(project.is_first_party(m) for m in modules)


def _inert(node: ast.stmt) -> bool:
    """`pass`, a docstring, a name bound to a constant: nothing that can raise ImportError."""
    if isinstance(node, ast.Expr | ast.Assign | ast.AnnAssign):
        return isinstance(node.value, ast.Constant)
    return isinstance(node, ast.Pass)


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    """`except ImportError`, `except ModuleNotFoundError`, or a tuple naming one of them."""
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((k.id if isinstance(k, ast.Name) else getattr(k, "attr", None)) in _CAUGHT
               for k in kinds if k is not None)
