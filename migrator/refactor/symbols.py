"""Moving top-level definitions between modules: a symbol row of the table, carried out.

A definition is a top-level `def`/`class` (with its decorators) or an assignment to one name,
with the comment lines directly above it. It leaves its old module and is appended to the new
one together with the imports it needs: the old module's imports of names it uses (relative
ones spelled absolute), and `from OLD import helper` for the old module's own names it uses.
The old module drops imports only the moved code used, and imports back what it still uses.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from migrator.core.modname import RelativeImportError, resolve_relative
from migrator.core.placement import IMPORTS, insertion


class SymbolError(ValueError):
    """A symbol row that cannot be carried out (its definition is not a top-level one)."""


@dataclass
class Extracted:
    """What leaves one old module: the definitions (renamed where the row renames them) and
    the import lines the new module needs for them."""

    blocks: list[str] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)


def top_level_names(tree: ast.Module) -> dict[str, ast.stmt]:
    """Top-level definitions by name: defs, classes, single-name assignments."""
    out: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
    return out


def extract(
    text: str, old_module: str, package: str, renames: dict[str, str], new_module: str
) -> tuple[str, Extracted]:
    """Take the definitions named in `renames` (old name -> new name) out of `text`, the source
    of `old_module` (whose relative imports are anchored at `package`).

    Returns the old module's new text and what goes to `new_module`.

    Raises:
        SyntaxError: `text` does not parse.
        SymbolError: a name is not a top-level definition of the module.
    """
    tree = ast.parse(text)
    defined = top_level_names(tree)
    missing = sorted(set(renames) - set(defined))
    if missing:
        raise SymbolError(f"{old_module}: no top-level definition of {', '.join(missing)}")
    moved = {id(defined[name]): defined[name] for name in renames}
    lines = text.splitlines(keepends=True)
    spans = sorted(_span(node, lines) for node in moved.values())
    out = Extracted()
    for start, end in spans:
        out.blocks.append(_rename("".join(lines[start:end]).rstrip() + "\n", renames))
    used_by_moved = _loads(list(moved.values()))
    rest = [node for node in tree.body if id(node) not in moved]
    used_by_rest = _loads(rest)
    binders = _import_binders(tree, package)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            out.imports.append(ast.unparse(node))
    needed: list[tuple[int, str]] = []  # in the old module's order
    for name in used_by_moved:
        if name in binders:
            needed.append((binders[name][0].lineno, binders[name][1]))
        elif name in defined and id(defined[name]) not in moved:
            needed.append((defined[name].lineno, f"from {old_module} import {name}"))
    out.imports.extend(line for _, line in sorted(needed))
    kept = _drop_unused_imports(tree, lines, spans, used_by_moved - used_by_rest)
    back = sorted(name for name in renames if name in used_by_rest)
    if back:
        aliases = ", ".join(n if renames[n] == n else f"{renames[n]} as {n}" for n in back)
        kept = _insert_after_imports(kept, tree, f"from {new_module} import {aliases}\n")
    return kept, out


def append(text: str, extracted: Extracted) -> str:
    """`text` (the new module's source, maybe empty) with the moved definitions at its end and
    the imports they need after its own imports (those it already has are not repeated)."""
    have = set(text.splitlines())
    imports = [line for line in dict.fromkeys(extracted.imports) if line not in have]
    futures = [line for line in imports if "__future__" in line]
    others = [line for line in imports if "__future__" not in line]
    body = text.rstrip()
    if others:
        tree = ast.parse(text) if text.strip() else None
        head = "".join(f"{line}\n" for line in others)
        body = _insert_after_imports(text, tree, head).rstrip() if tree else head.rstrip()
    if futures and not text.strip():
        body = "\n".join(futures) + "\n" + body
    blocks = "\n\n\n".join(block.rstrip() for block in extracted.blocks)
    return (body + "\n\n\n" if body else "") + blocks + "\n"


def rename_in_place(text: str, renames: dict[str, str]) -> str:
    """`text` with top-level definitions renamed and every plain name use of them (not
    attributes, not keywords) renamed too: a rename inside a module that stays one file.

    Raises:
        SyntaxError: `text` does not parse.
        SymbolError: a name is not a top-level definition of the module.
    """
    tree = ast.parse(text)
    missing = sorted(set(renames) - set(top_level_names(tree)))
    if missing:
        raise SymbolError(f"no top-level definition of {', '.join(missing)}")
    return _rename(text, renames)


def _rename(source: str, renames: dict[str, str]) -> str:
    """Rename names in a self-contained piece of source: `Name` nodes and def/class names."""
    wanted = {old: new for old, new in renames.items() if old != new}
    if not wanted:
        return source
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []  # line, byte column, length, replacement
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in wanted:
            edits.append((node.lineno, node.col_offset, len(node.id), wanted[node.id]))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name in wanted:
                line = lines[node.lineno - 1].encode()
                keyword = b"class " if isinstance(node, ast.ClassDef) else b"def "
                col = line.find(keyword, node.col_offset) + len(keyword)
                col = line.find(node.name.encode(), col)
                edits.append((node.lineno, col, len(node.name), wanted[node.name]))
    for lineno, col, length, new in sorted(edits, reverse=True):
        raw = lines[lineno - 1].encode()
        lines[lineno - 1] = (raw[:col] + new.encode() + raw[col + length :]).decode()
    return "".join(lines)


def _span(node: ast.stmt, lines: list[str]) -> tuple[int, int]:
    """0-based [start, end) line range of a definition: decorators and the comment lines
    directly above it included."""
    decorators = getattr(node, "decorator_list", [])
    start = min([node.lineno, *(d.lineno for d in decorators)]) - 1
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    end = node.end_lineno or node.lineno
    return start, end


def _loads(nodes: list[ast.stmt]) -> set[str]:
    return {
        n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)
    }


def _import_binders(tree: ast.Module, package: str) -> dict[str, tuple[ast.stmt, str]]:
    """Name bound by a top-level import -> (statement, an import line binding just it)."""
    out: dict[str, tuple[ast.stmt, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                out[bound] = (node, f"import {alias.name}" + _as(alias))
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            module = _absolute(node, package)
            for alias in node.names:
                if alias.name != "*":
                    out[alias.asname or alias.name] = (node, f"from {module} import {alias.name}"
                                                       + _as(alias))
    return out


def _as(alias: ast.alias) -> str:
    return f" as {alias.asname}" if alias.asname else ""


def _absolute(node: ast.ImportFrom, package: str) -> str:
    try:
        return resolve_relative(package, node.level, node.module)
    except RelativeImportError:
        # Python rejects it wherever it stands; carried along as written, it stays as broken.
        return "." * node.level + (node.module or "")


def _drop_unused_imports(
    tree: ast.Module, lines: list[str], removed: list[tuple[int, int]], unused: set[str]
) -> str:
    """The module's lines without the moved spans, and without the import aliases that bind
    a name in `unused` (a statement left with no alias goes; a shortened one is one line)."""
    replace: dict[int, tuple[int, str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.Import | ast.ImportFrom) or getattr(node, "module", "") == (
            "__future__"
        ):
            continue
        names = node.names
        keep = [a for a in names if (a.asname or a.name.partition(".")[0]) not in unused]
        if len(keep) == len(names):
            continue
        start, end = node.lineno - 1, node.end_lineno or node.lineno
        indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
        text = ""
        if keep:
            copy = ast.ImportFrom(node.module, keep, node.level) if isinstance(
                node, ast.ImportFrom) else ast.Import(keep)
            text = indent + ast.unparse(copy) + "\n"
        replace[start] = (end, text)
    for start, end in removed:
        replace[start] = (end, "")
    out: list[str] = []
    index = 0
    while index < len(lines):
        if index in replace:
            end, text = replace[index]
            out.append(text)
            index = end
            done = "".join(out)
            if not text and (not done.strip() or done.endswith("\n\n")):
                # the blank lines after a removed block would double those before it
                while index < len(lines) and not lines[index].strip():
                    index += 1
            continue
        out.append(lines[index])
        index += 1
    return "".join(out).rstrip() + "\n" if "".join(out).strip() else ""


def _insert_after_imports(text: str, tree: ast.Module | None, lines_text: str) -> str:
    """`text` with `lines_text` after its last top-level import (after the docstring, or at
    the top, when it has none)."""
    if tree is None:
        return lines_text + text
    current = ast.parse(text) if text.strip() else None
    at = insertion(text, IMPORTS, current.body if current else []).offset
    return text[:at] + lines_text + text[at:]
