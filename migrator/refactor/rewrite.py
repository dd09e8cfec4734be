"""Every file's bytes after the step, computed in memory from a plan: nothing is written here.

Order, per file: relative imports of files whose package changes (and of modules that give or
take definitions) are spelled absolute from the OLD package; definitions move; the engine of
`vam migrate` maps every reference (files that stay keep their anchors, as it always does);
the imports that were relative are spelled relative again from the NEW package; the package
that owns the step gets the shims. A file the engine cannot parse is reported, not changed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from pathlib import Path

from migrator.core import findings as F
from migrator.core.decoding import decode_python
from migrator.core.discover import SourceFile, iter_files, kind_of
from migrator.core.resolver import Resolver
from migrator.core.settings import Options
from migrator.refactor import shimline, symbols
from migrator.refactor.layout import module_path, package_of_file
from migrator.refactor.plan import Plan, PlanError
from migrator.refactor.relative import Origin, absolutize, relativize
from migrator.refactor.runtime import runtime_files
from migrator.rewrite.engine import Engine, Read
from rules import Pack


@dataclass
class Change:
    """One file's fate: `path` (relative to the root) gets `new`; `src` is where it came from
    (None for a new file) and `old` its bytes there (None for a new file)."""

    path: Path
    src: Path | None
    old: bytes | None
    new: bytes


@dataclass
class _Source:
    """A Python file held in memory during the rewrite."""

    text: str
    encoding: str = "utf-8"
    origins: list[Origin] = field(default_factory=list)
    absolute: set[str] = field(default_factory=set)


class Rewrite:
    """The contents after the step: `changes` (changed, moved and new files) and `findings`
    (what the engine reported; references it could not fix)."""

    def __init__(self, plan: Plan, pack: Pack, resolver: Resolver, shims: bool) -> None:
        self.plan = plan
        self.root = plan.root
        self.resolver = resolver
        self.engine = Engine(resolver, Options())
        self.held: dict[Path, _Source] = {}
        self.raw: dict[Path, bytes] = {}  # moved files that are not Python
        self.findings: list[F.Finding] = []
        self.changes: list[Change] = []
        self._load_moving()
        self._move_symbols()
        for init in plan.created:
            self.held.setdefault(init, _Source(""))
        self._run_engine()
        self._restore_relative()
        if shims:
            self._install_shims(pack)
        self._collect()

    # -- reading ---------------------------------------------------------------------------

    def _load_moving(self) -> None:
        for move in self.plan.moves:
            data = (self.root / move.src).read_bytes()
            if move.src.suffix in (".py", ".pyi"):
                package = package_of_file(self.root, self.root / move.src)
                self.held[move.dst] = self._read(data, package)
            else:
                self.raw[move.dst] = data

    def _hold(self, final: Path) -> _Source:
        """The in-memory source of the file that ends at `final` (read when first needed)."""
        if final not in self.held:
            src = self._src(final)
            data = (self.root / src).read_bytes() if (self.root / src).is_file() else b""
            self.held[final] = self._read(data, package_of_file(self.root, self.root / src))
        return self.held[final]

    def _src(self, final: Path) -> Path:
        for move in self.plan.moves:
            if move.dst == final:
                return move.src
        return final

    def _read(self, data: bytes, package: str) -> _Source:
        encoding, text = decode_python(data)
        before = ast.parse(text)
        absolute = {n.module for n in ast.walk(before) if isinstance(n, ast.ImportFrom)
                    and not n.level and n.module}
        text, origins = absolutize(text, package)
        return _Source(text, encoding, origins, self._targets(absolute, before))

    # -- definitions -----------------------------------------------------------------------

    def _move_symbols(self) -> None:
        for group in self.plan.symbols:
            old_file = self.plan.final(self._module_file(group.old_module))
            new_file = self._new_file(group.new_module)
            try:
                if old_file == new_file:
                    source = self._hold(old_file)
                    source.text = symbols.rename_in_place(source.text, group.renames)
                    continue
                old = self._hold(old_file)
                kept, extracted = symbols.extract(
                    old.text, group.old_module, "", group.renames, group.new_module
                )
                old.text = kept
                target = self._hold(new_file)
                target.text = symbols.append(target.text, extracted)
            except (SyntaxError, symbols.SymbolError) as exc:
                raise PlanError(f"{group.old_module} -> {group.new_module}: {exc}") from None

    def _module_file(self, dotted: str) -> Path:
        where = module_path(self.root, dotted)
        assert where is not None  # the plan only holds groups whose module exists
        return (where / "__init__.py" if where.is_dir() else where).relative_to(self.root)

    def _new_file(self, dotted: str) -> Path:
        parts = dotted.split(".")
        candidates = [Path(*parts, "__init__.py"), Path(*parts[:-1], parts[-1] + ".py")]
        finals = {m.dst for m in self.plan.moves} | set(self.plan.new_modules)
        for candidate in candidates:
            if candidate in finals or candidate in self.plan.created:
                return candidate
        for candidate in candidates:
            if (self.root / candidate).is_file():
                return self.plan.final(candidate)
        return candidates[1]

    # -- references ------------------------------------------------------------------------

    def _run_engine(self) -> None:
        gone = {m.src for m in self.plan.moves} | set(self.plan.dropped)
        seen: set[Path] = set()
        for source in iter_files([self.root]):
            rel = source.path.relative_to(self.root)
            if rel in gone:
                continue
            seen.add(rel)
            self._process(rel, source.kind)
        for rel in sorted({*self.held, *self.raw} - seen):
            self._process(rel, kind_of(rel))

    def _process(self, rel: Path, kind: str) -> None:
        source = SourceFile(self.root / rel, self.root, kind)
        held = self.held.get(rel)
        if held is not None:
            data: Read | None = held.text.encode(held.encoding)
        elif rel in self.raw:
            data = self.raw[rel]
        else:
            data = self.engine.screen(source)
            if data is None:
                return
        result = self.engine.process(source, data)
        self.findings += [replace(f, path=str(self.root / rel)) for f in result.findings
                          if not f.fixable]
        if result.new is None:
            return
        if held is not None:
            held.text = result.new.decode(held.encoding)
        elif rel in self.raw:
            self.raw[rel] = result.new
        else:
            self.raw[rel] = result.new

    def _targets(self, modules: set[str], tree: ast.Module) -> set[str]:
        """Where `from M import n` for M in `modules` may point after the engine ran."""
        out: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in modules and not node.level:
                out |= self._landings(Origin(node.module, tuple(a.name for a in node.names)))
        return out

    def _landings(self, origin: Origin) -> set[str]:
        out = {self.resolver.resolve_module(origin.module).new}
        for name in origin.names:
            out.add(self.resolver.resolve(f"{origin.module}.{name}").new.rpartition(".")[0])
        return out

    def _restore_relative(self) -> None:
        for rel, source in self.held.items():
            if not source.origins:
                continue
            wanted = set().union(*(self._landings(o) for o in source.origins)) - source.absolute
            package = package_of_file(self.root, self.root / rel)
            source.text = relativize(source.text, package, wanted)

    # -- shims -----------------------------------------------------------------------------

    def _install_shims(self, pack: Pack) -> None:
        owner = shimline.owner_package(self.plan.step)
        init = Path(*owner.split("."), "__init__.py") if owner else None
        if init is None or not (init in self.held or (self.root / init).is_file()):
            raise PlanError(
                f"no package under {self.root} holds every old name of step "
                f"{self.plan.step.version} (owner {owner or '-'}): use --no-shims"
            )
        source = self._hold(init)
        try:
            source.text = shimline.add_install(source.text, self.plan.step.version)
        except SyntaxError as exc:
            raise PlanError(f"{self.root / init}: cannot parse: {exc.msg}") from None
        for rel, text in runtime_files(pack, self.plan.step.version).items():
            self.raw[init.parent / rel] = text.encode()

    # -- result ----------------------------------------------------------------------------

    def _collect(self) -> None:
        finals: dict[Path, bytes] = {rel: s.text.encode(s.encoding) for rel, s in self.held.items()}
        finals.update(self.raw)
        for rel, new in sorted(finals.items()):
            src = self._src(rel)
            on_disk = self.root / src
            old = on_disk.read_bytes() if on_disk.is_file() else None
            moved = src != rel
            if old == new and not moved and (self.root / rel).is_file():
                continue
            self.changes.append(Change(rel, src if (moved or old is not None) else None, old, new))
