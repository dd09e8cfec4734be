"""One release of an upstream distribution, indexed only as far as a project touches it.

The release's module list is read once; a module is parsed (`summary.summarise`) the first
time a lookup needs it, and what was parsed is kept in `migrator.core.indexcache` under kind
"verify-api", one entry per distribution key (the sha256 of an archive, of a commit, or of a
tree's files), holding the module list and every summary parsed so far. A warm run whose
project touches no new upstream module never opens the archive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migrator.core import indexcache
from migrator.core.dists import DistRef, index_key, open_ref
from migrator.core.sources import Source
from migrator.verify_api.digest import summarise
from migrator.verify_api.signature import KWONLY, POS, Param, Signature

KIND = "verify-api"
CODE = tuple(Path(__file__).parent / name for name in ("digest.py", "nodes.py",
                                                       "signature.py", "upstream.py"))
# Top-level folders an sdist carries that no installed distribution provides.
NOT_SHIPPED = frozenset({"tests", "test", "testing", "benchmarks", "examples", "docs", "tools",
                         "scripts"})
_DEPTH = 12  # alias hops before a lookup gives up (a cycle of re-exports)


@dataclass(frozen=True)
class Obj:
    """What a dotted name is in the release: `kind` "module", "class" or "func"; `qual` the
    dotted name where it is defined; `data` its summary (a class dict, a signature list)."""

    kind: str
    qual: str
    data: Any = None


@dataclass
class AttrLookup:
    """An answer about a class's attribute: `found` in the class or an upstream base;
    `certain` when a miss is a miss (no `__getattr__`, every base indexed)."""

    found: bool
    certain: bool
    owner: str = ""


@dataclass
class Upstream:
    """A release of the distribution `label` (`vllm==0.33.0`, a path, `REPO@REV`)."""

    ref: DistRef
    packages: frozenset[str]
    version: str | None = None
    modules: dict[str, list[Any]] = field(default_factory=dict)  # name -> [rel path, is pkg]
    summaries: dict[str, Any] = field(default_factory=dict)
    key: str = ""
    parsed: int = 0  # modules parsed by this run (0 on a warm run)
    _source: Source | None = None
    # What `lookup` and `mro` answered, by name: a copy (`dataclasses.replace`) starts afresh.
    _found: dict[str, Obj | None] = field(default_factory=dict, init=False, repr=False,
                                          compare=False)
    _mros: dict[str, tuple[list[Obj], bool]] = field(default_factory=dict, init=False,
                                                     repr=False, compare=False)

    @property
    def label(self) -> str:
        return self.ref.label

    @classmethod
    def load(cls, ref: DistRef, packages: frozenset[str], cache: bool = True) -> Upstream:
        """The release `ref`, restricted to `packages` (empty: all it ships).

        Raises InputError when it cannot be read."""
        found = cls(ref, packages)
        if ref.is_tree:
            found._source = open_ref(ref)
        found.key = index_key(ref, found._source) if cache else ""
        stored = indexcache.load(KIND, found.key, _tag()) if found.key else None
        if isinstance(stored, dict) and isinstance(stored.get("modules"), dict):
            found.version = stored.get("version")
            found.modules = stored["modules"]
            found.summaries = dict(stored.get("summaries") or {})
        else:
            source = found.source()
            found.version = source.version
            found.modules = _module_map(source)
        if not found.packages:
            found.packages = found.shipped
        return found

    @property
    def shipped(self) -> frozenset[str]:
        """The top-level packages the release installs (not its tests, examples, ...)."""
        return frozenset(m.split(".")[0] for m in self.modules) - NOT_SHIPPED

    def source(self) -> Source:
        if self._source is None:
            self._source = open_ref(self.ref)
        return self._source

    def save(self) -> None:
        """Store what this run parsed (nothing when it parsed nothing, or without a key)."""
        if self.key and self.parsed:
            indexcache.store(KIND, self.key, _tag(), {
                "version": self.version, "modules": self.modules, "summaries": self.summaries})

    def summary(self, module: str) -> dict[str, Any]:
        if module in self.summaries:
            return dict(self.summaries[module])
        rel, is_package = self.modules[module]
        data = self.source().files.get(rel, b"") if rel else b""
        self.summaries[module] = summarise(data, module, bool(is_package))
        self.parsed += 1
        return dict(self.summaries[module])

    def provides(self, dotted: str) -> bool:
        return dotted.split(".")[0] in self.packages

    def lookup(self, dotted: str) -> Obj | None:
        """What `dotted` names here, following re-exports; None when the release lacks it or
        it lies outside the release's packages."""
        if dotted not in self._found:
            self._found[dotted] = self._lookup(dotted, 0)
        return self._found[dotted]

    def _lookup(self, dotted: str, depth: int) -> Obj | None:
        parts = dotted.split(".")
        if depth > _DEPTH or not self.provides(dotted):
            return None
        cut = next((i for i in range(len(parts), 0, -1)
                    if ".".join(parts[:i]) in self.modules), 0)
        if not cut:
            return None
        module = ".".join(parts[:cut])
        if cut == len(parts):
            return Obj("module", module)
        binding = self.summary(module)["names"].get(parts[cut])
        if binding is None:
            return None
        kind, data = binding
        rest = parts[cut + 1:]
        if kind == "alias":
            return self._lookup(".".join([data, *rest]), depth + 1)
        qual = f"{module}.{parts[cut]}"
        if kind == "func" and not rest:
            return Obj("func", qual, data)
        if kind == "class" and not rest:
            return Obj("class", qual, data)
        if kind == "class" and len(rest) == 1 and rest[0] in data["methods"]:
            return Obj("func", f"{qual}.{rest[0]}", data["methods"][rest[0]])
        return None

    def mro(self, qual: str) -> tuple[list[Obj], bool]:
        """The upstream classes of `qual` and its bases (depth first, left to right, each
        once), and whether every base was found in the release (`object` needs none)."""
        if qual not in self._mros:
            self._mros[qual] = self._mro(qual)
        classes, complete = self._mros[qual]
        return list(classes), complete

    def _mro(self, qual: str) -> tuple[list[Obj], bool]:
        seen: list[Obj] = []
        complete = True
        stack = [qual]
        while stack:
            name = stack.pop(0)
            if name == "builtins.object" or any(o.qual == name for o in seen):
                continue
            found = self.lookup(name)
            if found is None or found.kind != "class":
                complete = False
                continue
            seen.append(found)
            stack = [*found.data["bases"], *stack]
        return seen, complete

    def opaque(self, qual: str) -> bool:
        """Whether a class of `qual`'s bases derives from a name of the release that is not
        a class it can read (`class P(Adapter)` where `Adapter = make_adapter(...)`): its
        attributes cannot be listed."""
        for cls in self.mro(qual)[0]:
            for base in cls.data["bases"]:
                if base == "?" or (self.provides(base) and getattr(
                        self.lookup(base), "kind", None) != "class"):
                    return True
        return False

    def abstract_methods(self, qual: str) -> dict[str, str]:
        """{method: owner} of the abstract methods class `qual` leaves to its subclasses:
        those whose first definition up its bases is an `@abstractmethod`, where a class of
        them derives from `abc.ABC` (or `ABCMeta`), so that instantiating a subclass that
        defines none of them raises TypeError."""
        classes = self.mro(qual)[0]
        if not any(c.data.get("abc") for c in classes):
            return {}
        first: dict[str, tuple[str, bool]] = {}
        for cls in classes:
            abstract = set(cls.data.get("abstract", ()))
            for name in [*cls.data["methods"], *cls.data["attrs"]]:
                first.setdefault(name, (cls.qual, name in abstract))
        return {name: owner for name, (owner, abstract) in first.items() if abstract}

    def method(self, qual: str, name: str) -> tuple[str, Signature] | None:
        """(owner, signature) of method `name` as class `qual` resolves it, else None."""
        for cls in self.mro(qual)[0]:
            if name in cls.data["methods"]:
                return cls.qual, Signature.from_json(cls.data["methods"][name])
        return None

    def attribute(self, qual: str, name: str) -> AttrLookup:
        classes, complete = self.mro(qual)
        for cls in classes:
            data = cls.data
            if (name in data["methods"] or name in data["attrs"] or name in data["types"]
                    or any(f[0] == name for f in data["fields"] or ())):
                return AttrLookup(True, True, cls.qual)
        dynamic = any(c.data["dynamic"] for c in classes)
        return AttrLookup(False, complete and not dynamic)

    def attr_type(self, qual: str, name: str) -> str:
        for cls in self.mro(qual)[0]:
            if name in cls.data["types"]:
                return str(cls.data["types"][name])
        return ""

    def constructor(self, qual: str) -> Signature | None:
        """What calling class `qual` binds to: the first `__init__` up the bases, else the
        fields of its dataclasses; None when unknown (`__new__`, a decorator that may write the
        constructor, a base outside the release)."""
        classes, complete = self.mro(qual)
        for cls in classes:
            if cls.data["new"]:
                return None
            if cls.data.get("decorated") and "__init__" not in cls.data["methods"]:
                return None
            if "__init__" in cls.data["methods"]:
                return Signature.from_json(cls.data["methods"]["__init__"]).bound()
            if cls.data["fields"] is not None:
                return _dataclass_init(classes)
        return Signature(()) if complete else None

    def callable(self, obj: Obj) -> Signature | None:
        """The signature a call of `obj` binds to (a class: its constructor)."""
        if obj.kind == "class":
            return self.constructor(obj.qual)
        if obj.kind == "func":
            sig = Signature.from_json(obj.data)
            return sig.bound() if sig.kind == "class" else sig
        return None


def _dataclass_init(classes: list[Obj]) -> Signature:
    fields: dict[str, tuple[bool, bool]] = {}
    for cls in reversed(classes):
        for name, default, kw_only in cls.data["fields"] or ():
            fields[name] = (bool(default), bool(kw_only))
    params = [Param(n, KWONLY if kw else POS, d) for n, (d, kw) in fields.items()]
    params.sort(key=lambda p: p.kind == KWONLY)
    return Signature(tuple(params))


def _module_map(source: Source) -> dict[str, list[Any]]:
    """{module: [relative path ("" for a namespace folder), is a package]} of `source`."""
    modules: dict[str, list[Any]] = {}
    for rel in sorted(source.files):
        parts = rel[: -len(".py")].split("/")
        if not all(p.isidentifier() for p in parts):
            continue
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        for end in range(1, len(parts)):
            modules.setdefault(".".join(parts[:end]), ["", True])
        name = ".".join(parts)
        if is_package or not modules.get(name, [""])[0]:
            modules[name] = [rel, is_package]
    return modules


def _tag() -> str:
    return indexcache.code_tag(CODE)
