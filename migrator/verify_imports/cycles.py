"""Import cycles that break at import time (VAI003).

A cycle in the import graph is harmless until a `from m import X` runs while `m` is still
executing and has not bound X yet: CPython then raises "cannot import name 'X' from partially
initialized module 'm'". Only such cycles are reported, never a cycle as such.

The check replays CPython's import order statically: a module runs its import-time statements
in order; importing `a.b.c` imports `a`, `a.b`, `a.b.c` first; `from m import sub` imports the
submodule `m.sub`, which always succeeds (the import system falls back to sys.modules); a
module already running is not run again. Such a failure needs a cycle, so only strongly
connected components of the import graph are replayed. Modules outside a component cannot
reach back into it, so what happens inside depends only on which member runs first; for every
member `m`, a fresh `python -c "import m"` decides that first member (m's parent packages run
before m and may enter the component elsewhere), and each distinct first member is replayed
once, restricted to the component. The cost is components x distinct first members x events.
After a failure the replay carries on as if the name had been there, so every statement that
fails is reported in one run, not one per fix (tested against CPython in that sense).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from migrator.core.modname import RelativeImportError
from migrator.verify_imports import findings as codes
from migrator.verify_imports.checker import Show, unsuppressed
from migrator.verify_imports.discovery import SOURCE
from migrator.verify_imports.findings import ImportFinding
from migrator.verify_imports.index import ImportedName
from migrator.verify_imports.project import Project, resolve_from_module


@dataclass(frozen=True)
class _Event:
    """One import-time import statement: the modules it imports, in order, and for a `from`
    statement the module its names are taken from."""

    pos: int
    line: int
    chain: tuple[str, ...]
    from_module: str
    names: tuple[ImportedName, ...]
    guarded: bool


@dataclass(frozen=True)
class _Failure:
    importer: str
    alias: ImportedName
    target: str
    bound_line: int
    entry: str
    path: str  # the import chain, "a:3 -> b:7 -> a"
    guarded: bool
    caught_at: str = ""  # "module:line" of an outer guarded import that catches the error


class CycleChecker:
    """Finds the `from` imports that fail on a partially initialised module."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.events: dict[str, list[_Event]] = {}
        for name, mod in project.modules.items():
            if mod.kind == SOURCE:
                self.events[name] = self._events_of(name, mod.is_package)

    def _prefixes(self, dotted: str) -> tuple[list[str], bool]:
        """Existing first-party prefixes of `dotted` in import order, and whether all exist."""
        parts = dotted.split(".")
        found: list[str] = []
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix not in self.project.modules:
                return found, False
            found.append(prefix)
        return found, True

    def _events_of(self, module: str, is_package: bool) -> list[_Event]:
        info = self.project.info(module)
        if info is None or info.syntax_error:
            return []
        events = []
        for stmt in info.imports:
            if stmt.pos is None:
                continue
            chain: list[str] = []
            from_module = ""
            if stmt.is_from:
                try:
                    target = resolve_from_module(stmt, module, is_package)
                except RelativeImportError:
                    continue
                if not self.project.is_first_party(target):
                    continue
                chain, complete = self._prefixes(target)
                if complete and not stmt.is_star:
                    from_module = target
                    chain += [f"{target}.{a.name}" for a in stmt.names
                              if f"{target}.{a.name}" in self.project.modules]
            else:
                for alias in stmt.names:
                    if self.project.is_first_party(alias.name):
                        chain += [p for p in self._prefixes(alias.name)[0] if p not in chain]
            if chain:
                events.append(_Event(stmt.pos, stmt.line, tuple(chain), from_module, stmt.names,
                                     stmt.guarded))
        return events

    # -- components ---------------------------------------------------------------------------

    def _graph(self) -> dict[str, list[str]]:
        """module -> modules its import-time statements run or read names from. A module's own
        package chain is left out of what it runs (it is always started before the module is),
        but kept when the module takes names from it: `from pkg import X` inside pkg.sub."""
        graph = {}
        for module, events in self.events.items():
            started = _chain_of(module)
            targets: set[str] = set()
            for ev in events:
                targets.update(t for t in ev.chain if t not in started)
                if ev.from_module:
                    targets.add(ev.from_module)
            graph[module] = sorted(t for t in targets if t in self.events)
        return graph

    def components(self, graph: dict[str, list[str]] | None = None) -> list[list[str]]:
        """Strongly connected components that contain a cycle (`cyclic_components`)."""
        return cyclic_components(graph if graph is not None else self._graph())

    def _may_break(self, members: set[str]) -> bool:
        """Cheap filter: some `from` import inside the component takes a name its module binds
        only after that module's first import into the component."""
        first_inner = {}
        for m in members:
            inner = [ev.pos for ev in self.events[m] if any(t in members for t in ev.chain)]
            first_inner[m] = min(inner) if inner else None
        for m in members:
            for ev in self.events[m]:
                start = first_inner.get(ev.from_module)
                if ev.from_module not in members or start is None:
                    continue
                bindings = self.project.namespace(ev.from_module).bindings
                for alias in ev.names:
                    bound = bindings.get(alias.name)
                    if bound is not None and bound[0] >= start:
                        return True
        return False

    # -- replay -------------------------------------------------------------------------------

    def _first_entered(self, entry: str, members: set[str], reaches: set[str]) -> str:
        """The component member a fresh `import entry` runs first: the parents of `entry` run
        before it and may import into the component elsewhere (a depth-first walk in execution
        order through the modules that can reach the component)."""
        seen: set[str] = set()
        work = list(reversed(_chain_of(entry)))
        while work:
            module = work.pop()
            if module in seen or module not in reaches:
                continue
            if module in members:
                return module
            seen.add(module)
            work += [t for ev in reversed(self.events[module]) for t in reversed(ev.chain)]
        return entry

    def findings(self, show: Show, only: set[Path] | None = None) -> list[ImportFinding]:
        """VAI003 findings (VAI102 when the failing import is guarded), one per failing name,
        for importers whose file is in `only` (all when None)."""
        seen: set[tuple[str, int, int, str]] = set()
        result = []
        modules = self.project.modules
        graph = self._graph()
        reverse: dict[str, list[str]] = {}
        for module, targets in graph.items():
            for target in targets:
                reverse.setdefault(target, []).append(module)
        for component in self.components(graph):
            members = set(component)
            if not self._may_break(members):
                continue
            reaches = _reaching(members, reverse)
            # What happens inside a component depends only on which member runs first.
            entries = dict.fromkeys(self._first_entered(m, members, reaches) for m in component)
            for entry in entries:
                for failure in _Replay(self.project, self.events, entry, members).failures():
                    alias = failure.alias
                    key = (failure.importer, alias.line, alias.col, alias.name)
                    importer_path = modules[failure.importer].path
                    if key in seen or (only is not None and importer_path not in only):
                        continue
                    seen.add(key)
                    finding = self._finding(failure, show)
                    result += unsuppressed(self.project.source(importer_path), [finding])
        return result

    def _finding(self, failure: _Failure, show: Show) -> ImportFinding:
        modules = self.project.modules
        target_path = show(modules[failure.target].path)
        message = (
            f"cannot import name '{failure.alias.name}' from partially initialised module "
            f"'{failure.target}' (circular import when '{failure.entry}' is imported first: "
            f"{failure.path}; '{failure.alias.name}' is bound at "
            f"{target_path}:{failure.bound_line})"
        )
        code = codes.BROKEN_CYCLE
        if failure.caught_at:
            code = codes.GUARDED_IMPORT
            message = f"caught by except ImportError around {failure.caught_at}: {message}"
        elif failure.guarded:
            code, message = codes.GUARDED_IMPORT, f"guarded by except ImportError: {message}"
        return ImportFinding(show(modules[failure.importer].path), failure.alias.line,
                             failure.alias.col, code, message, failure.target, failure.alias.name)


class _Replay:
    """Replays `import entry` with `entry` the first member of its component to run; modules
    outside the component cannot reach back into it, so they are taken as imported."""

    def __init__(self, project: Project, events: dict[str, list[_Event]], entry: str,
                 members: set[str]) -> None:
        self.project = project
        self.events = events
        self.entry = entry
        self.members = members
        self.running: dict[str, int] = {}  # module -> position of the statement it is executing
        self.failed: dict[str, set[int]] = {}  # module -> positions of its statements that failed
        self.done: set[str] = set()
        root = _Event(0, 0, (entry,), "", (), False)
        self.frames: list[list] = [["", [root], 0, 0]]  # [module, events, event index, chain index]

    def failures(self) -> Iterable[_Failure]:
        frames, running = self.frames, self.running
        while frames:
            frame = frames[-1]
            module, events, ei, ci = frame
            if ei == len(events):
                frames.pop()
                if module:
                    del running[module]
                    self.done.add(module)
                continue
            ev = events[ei]
            if module:
                running[module] = ev.pos
            if ci < len(ev.chain):
                frame[3] = ci + 1
                target = ev.chain[ci]
                if target in self.members and target not in self.done and target not in running:
                    frames.append([target, self.events[target], 0, 0])
                continue
            frame[2], frame[3] = ei + 1, 0
            if ev.from_module in running:
                yield from self._from_running(ev, module)

    def _from_running(self, ev: _Event, module: str) -> Iterable[_Failure]:
        """The failure of a `from` statement whose module is still running, if it fails, and
        what an enclosing `except ImportError` makes of it."""
        failure = self._partial_import(ev, module)
        if failure is None:
            return
        self.failed.setdefault(module, set()).add(ev.pos)
        if failure.guarded:
            yield failure
            return
        frames = self.frames
        catcher = _innermost_guard(frames)
        if catcher is None:
            # The ImportError would end this import; carrying on as if the name were there
            # reports every failing statement at once, as they fail one fix after another.
            yield failure
            return
        # An outer `try: import ... except ImportError` catches it: the modules above that
        # statement are dropped from sys.modules and the catching module carries on.
        held = frames[catcher]
        caught = f"{held[0]}:{held[1][held[2]].line}"
        yield dataclasses.replace(failure, guarded=True, caught_at=caught)
        for dropped in frames[catcher + 1:]:
            self.running.pop(dropped[0], None)
        del frames[catcher + 1:]
        held[2], held[3] = held[2] + 1, 0

    def _partial_import(self, ev: _Event, importer: str) -> _Failure | None:
        target = ev.from_module
        ns = self.project.namespace(target)
        dead = self.failed.get(target, set())
        for alias in ev.names:
            if f"{target}.{alias.name}" in self.project.modules:
                continue
            first = ns.bindings.get(alias.name)
            if first is None:
                continue  # missing names are VAI001's business
            # The first binding that really happens: a failed `from` statement binds nothing.
            bound = next((b for b in sorted([first, *ns.rebinds.get(alias.name, [])])
                          if b[0] not in dead), None)
            if bound is None or bound[0] < self.running[target]:
                continue
            frames = self.frames
            start = next(i for i, f in enumerate(frames) if f[0] == target)
            steps = [f"{f[0]}:{f[1][f[2] - 1].line if f is frames[-1] else f[1][f[2]].line}"
                     for f in frames[start:]]
            return _Failure(importer, alias, target, bound[1], self.entry,
                            " -> ".join(steps + [target]), ev.guarded)
        return None


def cyclic_components(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components of `graph` that contain a cycle (Tarjan, iterative),
    each sorted, in the order Tarjan closes them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, int]] = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            successors = graph[node]
            if i < len(successors):
                work.append((node, i + 1))
                succ = successors[i]
                if succ not in index:
                    work.append((succ, 0))
                elif succ in on_stack:
                    low[node] = min(low[node], index[succ])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1 or node in graph[node]:
                    result.append(sorted(members))
    return result


def _innermost_guard(frames: list[list]) -> int | None:
    """Index of the innermost frame (below the failing one) whose running import statement
    sits in a try that catches ImportError."""
    for i in range(len(frames) - 2, 0, -1):
        frame = frames[i]
        if frame[1][frame[2]].guarded:
            return i
    return None


def _chain_of(module: str) -> list[str]:
    """`a.b.c` -> [a, a.b, a.b.c]: what importing it starts, in order."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _reaching(members: set[str], reverse: dict[str, list[str]]) -> set[str]:
    """`members` and every module with an import path into them."""
    found = set(members)
    work = list(members)
    while work:
        for source in reverse.get(work.pop(), []):
            if source not in found:
                found.add(source)
                work.append(source)
    return found
