"""Which rows of a move table the installed package can serve: a row is forwarded only when
its target is there.

A table holds a library's whole history, but one installed copy has one layout. A row whose
`new` that copy lacks (a later release's layout, or a module a later release removed) must
not be forwarded: its `old` may be a real module of this very copy (the repository's own
`vllm_ascend/` is the 0.14 layout, where `ascend_store.config_data` is real and
`ascend_store.metadata`, its 0.27.1rc1 name, does not exist).

The probe looks at files, never imports: the top-level package is located once (from
`sys.modules` when it is being imported, which is when its `__init__` installs the shims,
else by `importlib.machinery.PathFinder`), and each target is one or two `stat` calls below
it. A symbol row also needs its name in the target module's source text (word match: a
cheap test, enough to tell two layouts apart). Stdlib only.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from rules import ModuleMove, Pack, Step, SymbolMove, version_key


@dataclass(frozen=True)
class StepFit:
    """How much of one step the installed package can serve.

    `rows` counts the step's module and symbol rows; `missing` names the targets not found
    (one per row left out). `located` is False when the package could not be found on disk
    (a zip import, say): every row is then kept, as before this probe existed. `floor` is
    the pack's `shims-from` when the step is not after it: none of its rows is served.
    """

    version: str
    rows: int
    missing: tuple[str, ...]
    located: bool = True
    floor: str = ""

    @property
    def applies(self) -> bool:
        return not self.missing

    @property
    def verdict(self) -> str:
        """`applies`, `applies in part` or `does not apply`, with the reason."""
        if not self.rows:
            return "nothing to forward (only removals: `vam check` reports them)"
        if self.floor:
            return f"not served: the shims start after {self.floor} ([pack] shims-from)"
        if not self.located:
            return "applies (the package is not on disk: targets not checked)"
        if not self.missing:
            return "applies: every target is installed"
        first = f"{self.missing[0]} is not installed"
        if len(self.missing) == self.rows:
            return f"does not apply: {first} (nor any other target of the step)"
        kept = self.rows - len(self.missing)
        return f"applies in part ({kept} of {self.rows} rows): {first}" + (
            f" (+{len(self.missing) - 1} more)" if len(self.missing) > 1 else ""
        )


class Installed:
    """Answers "is this module / name installed?" for one pack, by looking at files.

    `search`: the directories to look in (like `sys.path`); None means `sys.path`, and
    also lets a package already in `sys.modules` answer for itself.
    """

    def __init__(self, search: Sequence[str] | None = None) -> None:
        self._search = None if search is None else list(search)
        self._roots: dict[str, list[str] | None] = {}
        self._texts: dict[str, bytes] = {}

    def module_file(self, dotted: str) -> str | None:
        """The file of module `dotted` (a package's `__init__.py`, or its directory for a
        namespace package), or None. Raises LookupError if its top package is not on disk."""
        top, _, rest = dotted.partition(".")
        roots = self._locate(top)
        if roots is None:
            raise LookupError(top)
        parts = rest.split(".") if rest else []
        for root in roots:
            base = os.path.join(root, *parts)
            if not parts:
                init = os.path.join(base, "__init__.py")
                return init if os.path.isfile(init) else base
            for candidate in (base + ".py", os.path.join(base, "__init__.py")):
                if os.path.isfile(candidate):
                    return candidate
            if os.path.isdir(base):
                return base
        return None

    def defines(self, dotted: str) -> bool:
        """True if the module of `dotted` exists and its source names the last component."""
        module, _, name = dotted.rpartition(".")
        path = self.module_file(module)
        if path is None or not path.endswith(".py"):
            return False
        text = self._texts.get(path)
        if text is None:
            try:
                with open(path, "rb") as handle:
                    text = self._texts[path] = handle.read()
            except OSError:
                return False
        return re.search(rb"\b" + re.escape(name.encode()) + rb"\b", text) is not None

    def _locate(self, top: str) -> list[str] | None:
        if top not in self._roots:
            self._roots[top] = self._find(top)
        return self._roots[top]

    def _find(self, top: str) -> list[str] | None:
        if self._search is None:
            module = sys.modules.get(top)
            path = getattr(module, "__path__", None)
            if path is not None:
                return [str(p) for p in path]
        spec = importlib.machinery.PathFinder.find_spec(top, self._search)
        if spec is None:
            # Not a plain directory on the path: an editable install's finder, say. A
            # top-level name imports no parent, so asking the import system is cheap.
            try:
                spec = importlib.util.find_spec(top)
            except (ImportError, ValueError):
                spec = None
        if spec is None or spec.submodule_search_locations is None:
            return None
        locations = list(spec.submodule_search_locations)
        return locations if all(os.path.isdir(p) for p in locations) else None


def fit(step: Step, installed: Installed, later: dict[str, str] | None = None) -> StepFit:
    """Which rows of `step` the installed package can serve (see `StepFit`).

    `later`: old -> new of the module rows of later steps that are served. A target that a
    later release moved again counts as installed when its newer home is (the chain
    `a` -> `b` -> `c` serves `a` when only `c` exists).
    """
    rules: tuple[ModuleMove | SymbolMove, ...] = (*step.modules, *step.symbols)
    missing: list[str] = []
    try:
        for rule in rules:
            target = _newest(rule.new, later or {})
            here = (
                installed.module_file(target) is not None
                if isinstance(rule, ModuleMove)
                else installed.defines(target)
            )
            if not here:
                missing.append(rule.new)
    except LookupError:
        return StepFit(step.version, len(rules), (), located=False)
    return StepFit(step.version, len(rules), tuple(missing))


def _newest(name: str, later: dict[str, str]) -> str:
    # Bounded: each hop follows a distinct row.
    for _ in range(len(later) + 1):
        probe = name
        while probe and probe not in later:
            probe = probe.rpartition(".")[0]
        if not probe:
            return name
        name = later[probe] + name[len(probe) :]
    return name


def served(pack: Pack, installed: Installed | None = None) -> tuple[Pack, tuple[StepFit, ...]]:
    """`pack` cut down to the rows whose targets are installed, and the fit of each step.

    Removals and stay-put names are kept (the shims never serve them).
    """
    installed = installed or Installed()
    later: dict[str, str] = {}
    found_fits: list[StepFit] = []
    for step in reversed(pack.steps):  # newest first: a chain ends in the newest layout
        found = fit(step, installed, later)
        if pack.shims_from and version_key(step.version) <= version_key(pack.shims_from):
            news = tuple(r.new for r in step.moves())
            found = StepFit(step.version, len(news), news, floor=pack.shims_from)
        found_fits.insert(0, found)
        for move in step.modules:
            if move.new not in found.missing:
                later.setdefault(move.old, move.new)
    fits = tuple(found_fits)
    steps = []
    for step, found in zip(pack.steps, fits, strict=True):
        gone = set(found.missing)
        steps.append(
            Step(
                version=step.version,
                removal=step.removal,
                summary=step.summary,
                modules=tuple(m for m in step.modules if m.new not in gone),
                symbols=tuple(s for s in step.symbols if s.new not in gone),
                removed=step.removed,
                stay=step.stay,
            )
        )
    kept = Pack(
        name=pack.name,
        description=pack.description,
        packages=pack.packages,
        steps=tuple(steps),
        source=pack.source,
        shims_env=pack.shims_env,
        shims_from=pack.shims_from,
    )
    return kept, fits
