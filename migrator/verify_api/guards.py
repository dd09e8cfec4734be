"""Which blocks only probe for an attribute (`hasattr`, `try: ... except AttributeError`);
which branch of a version guard runs at the target release is `migrator.core.guards.decide`."""

from __future__ import annotations

import ast

from migrator.verify_api.nodes import walk

_PROBES = frozenset({"AttributeError", "TypeError", "ImportError", "ModuleNotFoundError",
                     "NameError"})


def probes(test: ast.expr) -> bool:
    """`test` asks whether an attribute exists (`hasattr(...)`, `getattr(..., default)`)."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and n.func.id in ("hasattr", "getattr") for n in walk(test))


def catches_probe(handlers: list[ast.ExceptHandler]) -> bool:
    """A `try` whose handlers catch what a missing attribute or changed signature raises."""
    for handler in handlers:
        if handler.type is None:
            return True
        kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(ast.unparse(k).rsplit(".", 1)[-1] in _PROBES | {"Exception"} for k in kinds):
            return True
    return False
