"""Property tests for the Python rewriter on generated modules.

The generator plants references to moved names (module moves, symbol moves, imports of a
moved module from its parent, strings, attribute chains, comments, docstrings), near-miss
names that merely share a prefix, names that stay put, and unrelated code. Every fragment
carries its own expected text, derived from the move table's rows alone (never from the
engine), so the expected module - and its AST - is known before the engine runs.

Properties:
  (a) a second run changes nothing;
  (b) the AST after migration is the AST before with only the planted references mapped
      (and the comments too), and the text is exactly the expected text;
  (c) near-miss and stay-put fragments are never touched.
"""

from __future__ import annotations

import ast
import io
import itertools
import os
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migrator.core.resolver import Resolver
from migrator.rewrite.engine import Engine, Options
from rules import load_pack

STEP_VERSION = "0.14.0"
PACK = load_pack("vllm_ascend")
STEP = PACK.step(STEP_VERSION)
VAD = "vllm_ascend.distributed"

# -- what the generator knows: the table's rows, read directly ---------------------------------

MODULE_ROWS: dict[str, str] = {}
for _move in STEP.modules:
    MODULE_ROWS[_move.old] = _move.new
    for _sub in _move.submodules:
        MODULE_ROWS[f"{_move.old}.{_sub}"] = f"{_move.new}.{_sub}"
SYMBOL_ROWS: dict[str, str] = {s.old: s.new for s in STEP.symbols}


def expected_name(dotted: str, symbols: bool = True) -> str:
    """`dotted` after the step: rows whose `old` is its longest whole-component prefix.

    A step settles a name: below a moved package a name can land on another row's `old`
    (`kvpool.metadata` -> `ascend_store.metadata`, an intermediate path), which then
    applies too. `symbols=False` is the import-statement view, where a name is a module.
    """
    for _ in range(len(MODULE_ROWS) + len(SYMBOL_ROWS)):
        moved = _one_row(dotted, symbols)
        if moved == dotted:
            return dotted
        dotted = moved
    raise AssertionError(f"the table cycles on {dotted}")


def _one_row(dotted: str, symbols: bool) -> str:
    probe = dotted
    while probe:
        if symbols and probe in SYMBOL_ROWS:
            return SYMBOL_ROWS[probe] + dotted[len(probe) :]
        if probe in MODULE_ROWS:
            return MODULE_ROWS[probe] + dotted[len(probe) :]
        probe = probe.rpartition(".")[0]
    return dotted


def _under_an_old(name: str) -> bool:
    return any(name == old or name.startswith(old + ".") for old in (*MODULE_ROWS, *SYMBOL_ROWS))


MOVED_MODULES = sorted(MODULE_ROWS)
MOVED_SYMBOLS = sorted(SYMBOL_ROWS)
# Attribute names that no row mentions (so `old.mod.Attr` moves exactly with `old.mod`).
ATTRS = ["MooncakeConnector", "Backend", "KVCacheRecvingThread", "Helper", "CONSTANT"]
# In dotted references also a name that lands on another row: `kvpool.metadata` ->
# `ascend_store.metadata` (an intermediate old) -> `cpu_offload.metadata`.
REF_ATTRS = [*ATTRS, "metadata"]

NEAR_MISS = [
    f"{VAD}.kvpool_extra",
    f"{VAD}.kvpool_extra.backend",
    f"{VAD}.mooncake_connector_v1_barebone",
    f"{VAD}.utils.align_memory_v2",
    f"{VAD}.utils.align",
    f"{VAD}.communicators",
    f"{VAD}.cpu_offload_manager_old.metadata",
    f"my_{VAD}.mooncake_connector",
    f"my_{VAD}.kvpool.backend",
    f"my_{VAD}.communicator",
    f"vendored.{VAD}.mooncake_connector",
    "vllm_ascend_extra.distributed.ucm_connector",
    "vllm.distributed.kvpool.backend",
    "torch.distributed.communicator",
]
STAY_PUT = [
    VAD,
    f"{VAD}.utils",
    f"{VAD}.utils.fc3_all_gather_and_maybe_unpad_impl",
    f"{VAD}.parallel_state",
    f"{VAD}.parallel_state.get_p_tp_group",
    f"{VAD}.device_communicators.pyhccl",
    f"{VAD}.device_communicators.pyhccl_wrapper",
]
# Targets of the step: already migrated, so never touched again.
ALREADY_NEW = sorted(
    {n for n in (*MODULE_ROWS.values(), *SYMBOL_ROWS.values()) if not _under_an_old(n)}
)
STAYS = [*NEAR_MISS, *STAY_PUT, *ALREADY_NEW]
# Plain `import X` of these would become the anchor the engine adds `import new.module`
# after (for symbol chains); the generator only plants such imports in its preamble.
HOLDERS = {
    f"{VAD}.utils": f"{VAD}.kv_transfer.utils.utils",
    VAD: f"{VAD}.kv_transfer",
}
NEVER_PLAIN = {*HOLDERS, *HOLDERS.values()}

# Names no old or new name starts with: their count in a file must never change.
COUNTED = [
    n
    for n in (*NEAR_MISS, *STAY_PUT)
    if not any(
        other.startswith(n + ".") or other == n
        for other in (*MODULE_ROWS, *SYMBOL_ROWS, *MODULE_ROWS.values(), *SYMBOL_ROWS.values())
    )
]


def _children() -> dict[str, list[str]]:
    out: dict[str, set[str]] = {}
    for name in (*MOVED_MODULES, *MOVED_SYMBOLS, *STAYS):
        parent, _, leaf = name.rpartition(".")
        if parent.startswith(("vllm_ascend.", "my_vllm_ascend.")) or parent == "vllm_ascend":
            out.setdefault(parent, set()).add(leaf)
    return {parent: sorted(leaves) for parent, leaves in sorted(out.items())}


CHILDREN = _children()
PARENTS = sorted(CHILDREN)
VAD_CHILDREN = CHILDREN[VAD]
RELATIVE_MODULES = sorted(
    n[len(VAD) + 1 :] for n in (*MOVED_MODULES, *STAYS) if n.startswith(VAD + ".")
)


def test_generator_knowledge_is_consistent() -> None:
    """The pools mean what they say: stays map to themselves, moves do not."""
    assert all(expected_name(n) == n for n in STAYS)
    assert all(expected_name(n) != n for n in (*MOVED_MODULES, *MOVED_SYMBOLS))
    assert f"{VAD}.kvpool_extra" in COUNTED and f"{VAD}.utils" not in COUNTED
    assert len(MOVED_MODULES) > 15 and len(MOVED_SYMBOLS) == 6 and ALREADY_NEW


# -- fragments ---------------------------------------------------------------------------------

PRAGMA = "  # vam: ignore"


@dataclass
class Frag:
    """Lines of one planted fragment (unindented) and what they must become.

    `holders`: modules a rewritten symbol chain reached (`import <holder>` gets a sibling).
    `pragma_line`: the line a `# vam: ignore` may go on, None if it cannot carry one.
    """

    old: list[str]
    new: list[str]
    holders: frozenset[str] = frozenset()
    pragma_line: int | None = 0

    @property
    def stays(self) -> bool:
        return self.old == self.new


@dataclass(frozen=True)
class Ref:
    old: str
    new: str
    kind: str  # "module" (bare module), "attr" (module.Attr), "symbol", "stay", "near"


@st.composite
def refs(
    draw: st.DrawFn, kinds: tuple[str, ...] = ("module", "attr", "symbol", "stay", "near")
) -> Ref:
    kind = draw(st.sampled_from(kinds))
    if kind == "module":
        name = draw(st.sampled_from(MOVED_MODULES))
    elif kind == "attr":
        name = f"{draw(st.sampled_from(MOVED_MODULES))}.{draw(st.sampled_from(REF_ATTRS))}"
    elif kind == "symbol":
        name = draw(st.sampled_from(MOVED_SYMBOLS))
    elif kind == "near":
        name = draw(st.sampled_from(NEAR_MISS))
    else:
        name = draw(st.sampled_from([*STAY_PUT, *ALREADY_NEW]))
    return Ref(name, expected_name(name), kind)


def _both(template: str, ref_old: str, ref_new: str, **kw: object) -> Frag:
    lines_old = template.format(ref=ref_old, **kw).split("\n")
    lines_new = template.format(ref=ref_new, **kw).split("\n")
    return Frag(lines_old, lines_new)


def _path(dotted: str) -> str:
    return dotted.replace(".", "/")


# Import statements of a dotted module name.
IMPORT_FORMS = ["import {ref}", "import {ref} as m_{tag}", "import os, {ref}"]


@st.composite
def import_frag(draw: st.DrawFn, tag: int) -> Frag:
    ref = draw(refs(("module", "stay", "near")))
    template = draw(st.sampled_from(IMPORT_FORMS))
    if ref.old in NEVER_PLAIN and " as " not in template:
        template += " as m_{tag}"
    return _both(template, ref.old, expected_name(ref.old, symbols=False), tag=tag)


def render_from(
    module: str, entries: list[str], layout: str, trail: str, comments: list[str]
) -> list[str]:
    if layout == "line":
        return [f"from {module} import {', '.join(entries)}{trail}"]
    if layout == "backslash":
        return [f"from {module} import \\", "    " + ", ".join(entries)]
    return [
        f"from {module} import (",
        *(f"    {e},{c}" for e, c in zip(entries, comments, strict=True)),
        ")",
    ]


def plan(module: str, names: list[tuple[str, str | None]]) -> dict[str, list[str]]:
    """Resulting module -> `name [as alias]` entries, in order of first appearance.

    The conventions of cases/README.md: a moved binding whose last name changed and that
    has no alias keeps its old local name as the alias.
    """
    groups: dict[str, list[str]] = {}
    for name, alias in names:
        old = f"{module}.{name}"
        new = expected_name(old)
        new_module, _, new_name = new.rpartition(".")
        if new != old and new_name != name and alias is None:
            alias = name
        groups.setdefault(new_module, []).append(new_name + (f" as {alias}" if alias else ""))
    return groups


def _entries(names: list[tuple[str, str | None]]) -> list[str]:
    return [n + (f" as {a}" if a else "") for n, a in names]


def from_frag(
    module: str,
    names: list[tuple[str, str | None]],
    layout: str,
    trail: str,
    comments: list[str],
    spell: Callable[[str], str],
    resolves: bool = True,
) -> Frag:
    """A from-import and its expected rewrite; `spell` writes a module as the import does."""
    old = render_from(spell(module), _entries(names), layout, trail, comments)
    groups = plan(module, names) if resolves else {module: _entries(names)}
    if len(groups) == 1:
        ((new_module, entries),) = groups.items()
        new = render_from(spell(new_module), entries, layout, trail, comments)
    else:  # a split: one single-line statement per module, the trailing comment on the first
        new = [f"from {spell(m)} import {', '.join(es)}" for m, es in groups.items()]
        new[0] += trail
    return Frag(old, new, pragma_line=None if layout == "backslash" else 0)


@st.composite
def _names(
    draw: st.DrawFn, pool: list[str], tag: int, max_size: int = 4
) -> list[tuple[str, str | None]]:
    chosen = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=max_size, unique=True))
    aliases = draw(st.lists(st.booleans(), min_size=len(chosen), max_size=len(chosen)))
    pairs = enumerate(zip(chosen, aliases, strict=True))
    return [(n, f"a{tag}_{i}" if a else None) for i, (n, a) in pairs]


@st.composite
def from_module_frag(draw: st.DrawFn, tag: int) -> Frag:
    """`from <module> import Attr, ...`: the module moved (or stays); names follow it."""
    module = draw(refs(("module", "stay", "near"))).old
    names = draw(_names(ATTRS, tag, 3))
    layout = draw(st.sampled_from(["line", "paren", "backslash"]))
    trail = f"  # note {tag}" if layout == "line" and draw(st.booleans()) else ""
    comments = [draw(st.sampled_from(["", f"  # item {tag}.{i}"])) for i in range(len(names))]
    return from_frag(module, names, layout, trail, comments, spell=lambda m: m)


@st.composite
def from_parent_frag(draw: st.DrawFn, tag: int) -> Frag:
    """`from <parent> import child, ...` mixing moved, stay-put and near-miss children."""
    parent = draw(st.sampled_from(PARENTS))
    names = draw(_names(CHILDREN[parent] + ATTRS[:2], tag))
    layout = draw(st.sampled_from(["line", "paren", "backslash"]))
    trail = f"  # note {tag}" if layout == "line" and draw(st.booleans()) else ""
    return from_frag(parent, names, layout, trail, [""] * len(names), spell=lambda m: m)


def _relative(module: str) -> str:
    assert module == VAD or module.startswith(VAD + "."), module
    return "." + module[len(VAD) + 1 :]


@st.composite
def relative_frag(draw: st.DrawFn, tag: int, package: str | None) -> Frag:
    """Relative imports: resolved only inside `vllm_ascend.distributed`, and stay relative."""
    resolves = package == VAD
    layout = draw(st.sampled_from(["line", "paren"]))
    if draw(st.booleans()):
        module = f"{VAD}.{draw(st.sampled_from(RELATIVE_MODULES))}"
        names = draw(_names(ATTRS, tag, 2))
    else:
        module = VAD
        names = draw(_names(VAD_CHILDREN, tag))
    return from_frag(module, names, layout, "", [""] * len(names), _relative, resolves)


CHAIN_FORMS = [
    "x_{tag} = {ref}",
    "{ref}({tag})",
    "@{ref}\ndef dec_{tag}():\n    pass",
    "def ann_{tag}(arg: {ref}) -> None:\n    pass",
    "ok_{tag} = isinstance(None, {ref})",
    'pair_{tag} = ("中文", {ref})',
]


@st.composite
def chain_frag(draw: st.DrawFn, tag: int) -> Frag:
    ref = draw(refs())
    frag = _both(draw(st.sampled_from(CHAIN_FORMS)), ref.old, ref.new, tag=tag)
    if ref.kind == "symbol":
        frag.holders = frozenset({ref.old.rpartition(".")[0]})
    return frag


STRING_FORMS = [
    'p_{tag} = mock.patch("{ref}")',
    'm_{tag} = importlib.import_module("{ref}")',
    'sys.modules["{ref}"] = None',
    'register_connector("Conn{tag}", "{ref}", "Cls")',
    'cfg_{tag} = dict(kv_connector_module_path="{ref}")',
    'j_{tag} = \'{{"kv_connector_module_path": "{ref}"}}\'',
    'ep_{tag} = "{ref}:obj"',
    'cjk_{tag} = "调用{ref}中"',
    'b_{tag} = b"{ref}"',
    'f_{tag} = f"{{cfg}} {ref}"',
]
PATH_FORMS = [
    'pth_{tag} = "{ref}.py"',
    'dir_{tag} = "{ref}/"',
    'site_{tag} = "/opt/venv/site-packages/{ref}/__init__.py"',
]
PATH_NEAR_MISSES = [
    'pj_{tag} = "vllm_ascend/distributed/mooncake_connector.json"',
    'bare_{tag} = "mooncake_connector.py"',
    'own_{tag} = "tests/vllm_ascend/distributed/kvpool_extra/test_x.py"',
]


@st.composite
def string_frag(draw: st.DrawFn, tag: int) -> Frag:
    form = draw(st.sampled_from(["string", "path", "entry", "near"]))
    if form == "string":
        ref = draw(refs())
        return _both(draw(st.sampled_from(STRING_FORMS)), ref.old, ref.new, tag=tag)
    if form == "path":  # file paths follow module moves only
        # `vendored/vllm_ascend/...` is a real path reference (any folder may come first).
        ref = draw(refs(("module", "stay", "near")).filter(lambda r: "vendored" not in r.old))
        template = draw(st.sampled_from(PATH_FORMS))
        return _both(template, _path(ref.old), _path(expected_name(ref.old, False)), tag=tag)
    if form == "entry":  # `module:object`, where the object may be a moved symbol
        ref = draw(refs(("attr", "symbol", "stay", "near")))
        old_mod, _, obj = ref.old.rpartition(".")
        new_mod, _, new_obj = ref.new.rpartition(".")
        return _both('ep_{tag} = "{ref}"', f"{old_mod}:{obj}", f"{new_mod}:{new_obj}", tag=tag)
    return _both(draw(st.sampled_from(PATH_NEAR_MISSES)), "", "", tag=tag)


COMMENT_FORMS = ["# see {ref} here", "c_{tag} = 0  # {ref}", "# 注释：{ref}。"]


@st.composite
def comment_frag(draw: st.DrawFn, tag: int) -> Frag:
    if draw(st.booleans()):
        ref = draw(refs())
        return _both(draw(st.sampled_from(COMMENT_FORMS)), ref.old, ref.new, tag=tag)
    # Commented-out code counts as code.
    ref = draw(refs(("module", "stay", "near")))
    new = expected_name(ref.old, symbols=False)
    template = draw(st.sampled_from(["# import {ref}", "# from {ref} import Helper"]))
    return _both(template, ref.old, new, tag=tag)


@st.composite
def docstring_frag(draw: st.DrawFn, tag: int) -> Frag:
    ref = draw(refs())
    template = 'def doc_{tag}():\n    """Uses {ref} here."""\n    return None'
    frag = _both(template, ref.old, ref.new, tag=tag)
    frag.pragma_line = 1
    return frag


UNRELATED = [
    "def helper_{tag}(x):\n    return x + {tag}",
    'VALUE_{tag} = {{"key": [1, 2, 3]}}',
    'print("vllm.distributed.kv_transfer and torch.distributed")',
    "# an ordinary comment {tag}",
    "import json as json_{tag}",
    "for i_{tag} in range(2):\n    pass",
    's_{tag} = "mooncake_connector kvpool communicator align_memory"',
    "mooncake_connector_{tag} = kvpool_{tag} = {tag}",
    "from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1",
]


@st.composite
def fragment(draw: st.DrawFn, tag: int, package: str | None) -> Frag:
    kind = draw(
        st.sampled_from(
            ["import", "from", "parent", "relative", "chain", "string", "string", "comment"]
            + ["docstring", "unrelated"]
        )
    )
    if kind == "unrelated":
        frag = _both(draw(st.sampled_from(UNRELATED)), "", "", tag=tag)
        frag.pragma_line = None
        return frag
    frag = {
        "import": lambda: draw(import_frag(tag)),
        "from": lambda: draw(from_module_frag(tag)),
        "parent": lambda: draw(from_parent_frag(tag)),
        "relative": lambda: draw(relative_frag(tag, package)),
        "chain": lambda: draw(chain_frag(tag)),
        "string": lambda: draw(string_frag(tag)),
        "comment": lambda: draw(comment_frag(tag)),
        "docstring": lambda: draw(docstring_frag(tag)),
    }[kind]()
    if frag.pragma_line is not None and not frag.stays and draw(st.integers(0, 5)) == 0:
        frag.old[frag.pragma_line] += PRAGMA
        frag.new = list(frag.old)
        frag.holders = frozenset()
    return frag


BLOCKS = [
    ("def block_{tag}():", []),
    ("class Block{tag}:", []),
    ("if TYPE_CHECKING:", []),
    ("try:", ["except ImportError:", "    pass"]),
]


@dataclass
class Planted:
    """A generated module: the source, the expected result, and what it holds."""

    source: str
    expected: str
    package: str | None
    stays: list[str] = field(default_factory=list)  # indented text of untouched fragments


@st.composite
def modules(draw: st.DrawFn) -> Planted:
    package = draw(st.sampled_from([None, VAD, "downstream.plugin"]))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    tags = itertools.count(1)
    old: list[str] = []
    new: list[str] = []
    stays: list[str] = []
    holders: set[str] = set()

    def place(frag: Frag, indent: str) -> None:
        old.extend(indent + line for line in frag.old)
        new.extend(indent + line for line in frag.new)
        holders.update(frag.holders)
        if frag.stays:
            stays.append(newline.join(indent + line for line in frag.old))

    if draw(st.booleans()):
        ref = draw(refs())
        place(_both('"""Module notes: {ref} is used below."""', ref.old, ref.new), "")
    preamble_at = len(old)
    with_utils, with_vad = draw(st.booleans()), draw(st.booleans())
    preamble = ["import importlib", "import sys", "from typing import TYPE_CHECKING"]
    preamble += ["from unittest import mock", "", "import vllm_ascend"]
    for _ in range(draw(st.integers(1, 8))):
        tag = next(tags)
        if draw(st.integers(0, 3)) == 0:
            header, footer = draw(st.sampled_from(BLOCKS))
            old.append(header.format(tag=tag))
            new.append(header.format(tag=tag))
            for _ in range(draw(st.integers(1, 3))):
                place(draw(fragment(next(tags), package)), "    ")
            old.extend(["    pass", *footer])
            new.extend(["    pass", *footer])
        else:
            place(draw(fragment(tag, package)), "")
    # The engine adds `import <new module>` after `import <old module>` for symbols that
    # attribute chains now reach in their new module.
    preamble_new = list(preamble)
    for holder, wanted in ((f"{VAD}.utils", with_utils), (VAD, with_vad)):
        if wanted:
            preamble.append(f"import {holder}")
            preamble_new.append(f"import {holder}")
            if holder in holders:
                preamble_new.append(f"import {HOLDERS[holder]}")
    old[preamble_at:preamble_at] = preamble
    new[preamble_at:preamble_at] = preamble_new
    end = newline if draw(st.booleans()) else ""
    return Planted(newline.join(old) + end, newline.join(new) + end, package, stays)


# -- the properties ----------------------------------------------------------------------------

ENGINE = Engine(Resolver(PACK, None, STEP_VERSION), Options())
SETTINGS = settings(
    max_examples=int(os.environ.get("VAM_HYPOTHESIS_EXAMPLES", "500")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def migrate(text: str, package: str | None) -> str:
    return ENGINE.transform_python(text, package)[0]


def comments(text: str) -> list[str]:
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [t.string for t in tokens if t.type == tokenize.COMMENT]


def _explain(module: Planted, out: str) -> str:
    return (
        f"\n--- source ---\n{module.source}\n--- got ---\n{out}"
        f"\n--- expected ---\n{module.expected}"
    )


@SETTINGS
@given(modules())
def test_second_run_changes_nothing(module: Planted) -> None:
    once = migrate(module.source, module.package)
    assert migrate(once, module.package) == once, _explain(module, once)


@SETTINGS
@given(modules())
def test_ast_changes_only_by_the_planted_mapping(module: Planted) -> None:
    out = migrate(module.source, module.package)
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(module.expected)), _explain(module, out)
    assert comments(out) == comments(module.expected), _explain(module, out)


@SETTINGS
@given(modules())
def test_output_is_exactly_the_expected_text(module: Planted) -> None:
    out = migrate(module.source, module.package)
    assert out == module.expected, _explain(module, out)


def _count(name: str, text: str) -> int:
    return len(re.findall(rf"(?<![A-Za-z0-9_.]){re.escape(name)}(?![A-Za-z0-9_])", text))


@SETTINGS
@given(modules())
def test_near_misses_and_stay_put_names_are_never_touched(module: Planted) -> None:
    out = migrate(module.source, module.package)
    for block in module.stays:
        assert out.count(block) >= module.source.count(block), (block, _explain(module, out))
    for name in COUNTED:
        assert _count(name, out) == _count(name, module.source), (name, _explain(module, out))


def test_a_name_below_a_moved_package_that_lands_on_another_old_settles_in_one_run() -> None:
    source = f'x = "{VAD}.kvpool.metadata"\n'
    once = migrate(source, None)
    assert once == f'x = "{VAD}.kv_transfer.kv_pool.cpu_offload.metadata"\n'
    assert migrate(once, None) == once
