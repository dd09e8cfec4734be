"""Reading a move table for people and other tools: explain, show, check against trees, export."""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection
from pathlib import Path

from migrator.core.forwarding import read_getattr
from migrator.core.resolver import Resolver
from rules import ModuleMove, Pack, Step, SymbolMove, is_under, version_key

# `names(tree, module)`: every name `module` of the tree binds at its top, star imports
# (`from .x import *`) followed. The kernel reads plain bindings and `__getattr__` itself; the
# commands pass verify-imports' answer for the rest (`migrator.verify_imports.treenames`).
ModuleNames = Callable[[Path, str], Collection[str]]


def explain_name(pack: Pack, dotted: str) -> list[str]:
    """Lines describing what each step did to `dotted`; empty if the table never names it."""
    lines: list[str] = []
    current = dotted
    first = ""  # the step that first moved or removed the name
    for step in pack.steps:
        one = Resolver(pack, _before(pack, step), step.version)
        resolution = one.resolve(current)
        removal = f", old path kept by the shims until {step.removal}" if step.removal else ""
        if resolution.removed is not None:
            # One line, the note in brackets: a removal's line is the whole story.
            note = "".join(f" [{n}]" for n in _before_baseline(pack, step, first, "removed"))
            lines.append(
                f"{step.version}: removed ({resolution.removed.old}), no replacement: "
                f"{resolution.removed.hint}{note}"
            )
            return [dotted, *["  " + line for line in lines]]
        if resolution.changed:
            hit = resolution.first
            what = "module move" if hit.kind == "module" else "symbol move"
            lines.append(
                f"{step.version}: {current} -> {resolution.new}  ({what} {hit.old} -> "
                f"{hit.new}{removal})"
            )
            current = resolution.new
            first = first or step.version
        elif step.stays(current):
            lines.append(f"{step.version}: stays put (listed in the table)")
        else:
            for move in step.moves():
                if is_under(current, move.new):
                    lines.append(
                        f"{step.version}: new home of {move.old}{current[len(move.new) :]}"
                    )
    if not lines:
        return []
    if first:
        lines += [f"note: {n}" for n in _before_baseline(pack, pack.step(first), first, "moved")]
    if current != dotted:
        lines.append(f"now: {current}   (rewrite references with `vam migrate`)")
    return [dotted, *["  " + line for line in lines]]


def _before_baseline(pack: Pack, step: Step, first: str, what: str) -> list[str]:
    """The note for a name a step up to the pack's `default-from` first changed: runs that
    find no baseline report it (VAM009) and leave it."""
    first = first or step.version
    if not pack.default_from or version_key(first) > version_key(pack.default_from):
        return []
    before = _before(pack, pack.step(first)) or "0"
    act = "migrate it" if what == "moved" else "have it reported as removed (VAM003)"
    return [
        f"{what} in {first}, before {pack.default_from}, the {pack.name} table's default "
        f"baseline: with no --from (nor [tool.vam] from, nor a pinned release) `vam migrate` "
        f"and `vam check` report it (VAM009) and leave it; pass --from {before} to {act}"
    ]


def _before(pack: Pack, step: Step) -> str | None:
    index = pack.steps.index(step)
    return pack.steps[index - 1].version if index else None


def as_dotted(name: str, packages: tuple[str, ...]) -> str:
    """`pkg.mod.obj` from the spellings users paste: a dotted name, `pkg.mod:obj`, or a file
    path (`./pkg/mod.py`, `/.../site-packages/pkg/sub/__init__.py`, `pkg/sub/`). Not
    validated: the caller checks the result is a dotted name."""
    text = name.strip().replace(":", ".")
    if "/" not in text and "\\" not in text:
        return text
    parts = [p for p in text.replace("\\", "/").split("/") if p and p != "."]
    starts = [i for i, part in enumerate(parts) if part in packages]
    if starts:
        parts = parts[starts[0] :]
    if parts and parts[-1].endswith((".py", ".pyi")):
        parts[-1] = parts[-1].rsplit(".", 1)[0]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def show_pack(pack: Pack) -> str:
    out = [
        f"{pack.name}: {pack.description}",
        f"  source: {pack.source}",
        f"  packages scanned: {', '.join(pack.packages)}",
    ]
    for step in pack.steps:
        removal = f" (old paths removed in {step.removal})" if step.removal else ""
        out.append(f"\nstep {step.version}{removal}: {step.summary}")
        width = max((len(r.old) for r in step.moves()), default=0)
        for move in step.modules:
            flag = "  [intermediate]" if move.intermediate else ""
            out.append(f"  module  {move.old.ljust(width)}  ->  {move.new}{flag}")
            for sub in move.submodules:
                out.append(f"            .{sub}")
        for symbol in step.symbols:
            out.append(f"  symbol  {symbol.old.ljust(width)}  ->  {symbol.new}")
        for removed in step.removed:
            out.append(f"  removed {removed.old}: {removed.hint}")
        for name in step.stay:
            out.append(f"  stays   {name}")
    return "\n".join(out)


def tree_root(tree: Path, packages: tuple[str, ...]) -> Path:
    """The folder that holds the packages: `tree` itself, or its parent when `tree` is the
    package folder (`.../vllm_ascend`)."""
    if not any((tree / package).is_dir() for package in packages) and tree.name in packages:
        return tree.parent
    return tree


def check_against(step: Step, old_tree: Path, new_tree: Path,
                  names: ModuleNames | None = None) -> list[str]:
    """Errors for rows whose `old` is missing from `old_tree` or `new` from `new_tree`.

    Intermediate rows (paths that never shipped in a release) are exempt. A name a module
    serves only through a star import counts when `names` is given.
    """
    errors: list[str] = []
    for move in step.modules:
        if move.intermediate:
            continue
        for suffix in ("", *(f".{s}" for s in move.submodules)):
            if not _module_file(old_tree, move.old + suffix):
                errors.append(
                    f"{move.where}: old module {move.old + suffix!r} not found in {old_tree}"
                )
            if not _module_file(new_tree, move.new + suffix):
                errors.append(
                    f"{move.where}: new module {move.new + suffix!r} not found in {new_tree}"
                )
    for symbol in step.symbols:
        errors.extend(_check_symbol(symbol, old_tree, new_tree, names))
    for removed in step.removed:
        if not (_module_file(old_tree, removed.old) or _defines(old_tree, removed.old, names)):
            errors.append(f"{removed.where}: removed name {removed.old!r} not found in {old_tree}")
    return errors


def _check_symbol(symbol: SymbolMove, old_tree: Path, new_tree: Path,
                  names: ModuleNames | None) -> list[str]:
    errors = []
    if _module_file(old_tree, symbol.old):
        errors.append(
            f"{symbol.where}: {symbol.old!r} is a module in {old_tree}, not a symbol: "
            "use a [[step.module]] row"
        )
    elif not _defines(old_tree, symbol.old, names):
        errors.append(
            f"{symbol.where}: old module {symbol.old_module!r} defines no "
            f"{symbol.old_name!r} in {old_tree}"
        )
    if not _defines(new_tree, symbol.new, names):
        errors.append(
            f"{symbol.where}: new module {symbol.new_module!r} defines no "
            f"{symbol.new_name!r} in {new_tree}"
        )
    return errors


def name_exists(tree: Path, dotted: str) -> bool:
    """True if `dotted` is a module of `tree` or a name bound at the top of one (`a.b.C`;
    an attribute path below it, `a.b.C.method`, counts when `a.b` binds `C`)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if _module_file(tree, module):
            return cut == len(parts) or _defines(tree, f"{module}.{parts[cut]}")
    return False


def _module_file(tree: Path, dotted: str) -> Path | None:
    base = tree.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return base if base.is_dir() else None


def _defines(tree: Path, dotted: str, names: ModuleNames | None = None) -> bool:
    """True if the module of `dotted` binds its last name at top level, its module-level
    `__getattr__` serves it (a deprecation forwarder: the name still imports), or, with
    `names`, one of its star imports binds it."""
    module, _, name = dotted.rpartition(".")
    path = _module_file(tree, module)
    if path is None or path.is_dir():
        return False
    data = path.read_bytes()
    try:
        body = ast.parse(data).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if name in _bound_names(body):
        return True
    served = read_getattr(data, module, path.name == "__init__.py",
                          lambda d: _module_file(tree, d) is not None)
    if served is not None and name in served.served:
        return True
    return names is not None and name in names(tree, module)


def _bound_names(body: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):
            names |= _bound_names(node.body)
            for handler in getattr(node, "handlers", []):
                names |= _bound_names(handler.body)
            names |= _bound_names(node.orelse)
    return names


def export_ruff(pack: Pack, standalone: bool) -> str:
    """ruff configuration banning every old module and symbol (rule TID251).

    One entry per name, from the first step that moved or removed it (TOML keys are unique;
    side branches move some names twice). A name that a later step wrote (a path a later
    release re-created) is not banned: code written for that release spells it.
    """
    prefix = "lint." if standalone else "tool.ruff.lint."
    lines = []
    if standalone:
        lines += ["[lint]", 'select = ["TID251"]', ""]
    lines.append(f"[{prefix}flake8-tidy-imports.banned-api]")
    resolver = Resolver(pack)
    seen: set[str] = set()

    def ban(name: str, step: Step, message: str) -> None:
        written = resolver.written_for(name)
        if name in seen or (written is not None and written > version_key(step.release)):
            return
        seen.add(name)
        # A TOML basic string: a hint may quote code (`cache_policy="lru"`).
        quoted = message.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'"{name}".msg = "{quoted}"')

    for step in pack.steps:
        for move in step.moves():
            names = [move.old]
            if isinstance(move, ModuleMove):
                names += [f"{move.old}.{s}" for s in move.submodules]
            for name in names:
                new = move.new + name[len(move.old) :]
                ban(name, step, f"moved to {new} in {step.version}; run `vam migrate`")
        for removed in step.removed:
            ban(removed.old, step, f"removed in {step.version}: {removed.hint}")
    return "\n".join(lines) + "\n"
