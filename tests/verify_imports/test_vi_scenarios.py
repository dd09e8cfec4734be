"""S10-S13 from SCENARIOS.md: PEP 562 modules, `from pkg import sub` in `__init__`, only the
cycles that break, and single files giving the same findings as the whole tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migrator.verify_imports import verify_static
from tests.verify_imports.vi_helpers import codes, python_import, static

# -- S10 ---------------------------------------------------------------------------------------


def test_s10_names_served_by_module_getattr_are_unknown_not_missing(tree) -> None:
    tree({
        "pkg/__init__.py": "",
        "pkg/new.py": "def align_memory(): ...\n",
        # the shim pattern: the old module forwards moved names lazily
        "pkg/old.py": """
            import importlib

            def fc3_all_gather(x):
                return x

            def __getattr__(name):
                if name == "align_memory":
                    return importlib.import_module("pkg.new").align_memory
                raise AttributeError(name)
        """,
        "pkg/user.py": "from pkg.old import align_memory, fc3_all_gather\n",
    })
    found = static("pkg")
    assert codes(found) == [("pkg/user.py", 1, 21, "VAI100")]
    assert found[0].severity == "warning"
    assert "module-level __getattr__ (PEP 562)" in found[0].message


def test_s10_package_getattr_does_not_hide_missing_submodules(tree) -> None:
    tree({
        "pkg/__init__.py": "def __getattr__(name):\n    raise AttributeError(name)\n",
        "pkg/real.py": "",
        "pkg/user.py": "from pkg import real, lazy\nimport pkg.gone\n",
    })
    found = static("pkg")
    # `lazy` may come from __getattr__ (unknown); `import pkg.gone` needs a real module
    assert codes(found) == [("pkg/user.py", 1, 23, "VAI100"), ("pkg/user.py", 2, 8, "VAI002")]


# -- S11 ---------------------------------------------------------------------------------------


def test_s11_from_pkg_import_sub_inside_its_own_init(tree) -> None:
    root = tree({
        "pkg/__init__.py": """
            from pkg import kv_p2p
            from . import kv_pool as pool
            from .kv_pool import ascend_store
            import pkg.kv_pool.cpu_offload

            __all__ = ["kv_p2p", "pool", "ascend_store"]
        """,
        "pkg/kv_p2p.py": "",
        "pkg/kv_pool/__init__.py": "",
        "pkg/kv_pool/ascend_store.py": "",
        "pkg/kv_pool/cpu_offload.py": "from pkg import kv_p2p\n",
        "pkg/user.py": "from pkg import kv_p2p, pool, ascend_store\n",
    })
    assert static("pkg") == []
    assert python_import(root, "pkg.user").returncode == 0


# -- S12 ---------------------------------------------------------------------------------------


def test_s12_a_cycle_that_never_breaks_is_not_reported(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        # module-object imports only: the partial module is bound, attributes used later
        "pkg/a.py": "import pkg.b\n\ndef fa():\n    return pkg.b.fb\n",
        "pkg/b.py": "import pkg.a\nfrom pkg import a as a_mod\n\ndef fb():\n    return pkg.a.fa\n",
        # a cycle closed only inside a function and under TYPE_CHECKING
        "pkg/c.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from pkg.d import D
            def make() -> "D":
                from pkg.d import D
                return D()
            C = 1
        """,
        "pkg/d.py": "from pkg.c import C\nclass D: ...\n",
    })
    assert static("pkg") == []
    for module in ("pkg.a", "pkg.b", "pkg.c", "pkg.d"):
        assert python_import(root, module).returncode == 0, module


def test_s12_a_cycle_that_breaks_only_in_one_import_order(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        "pkg/a.py": "X = 1\nfrom pkg.b import Y\n",
        "pkg/b.py": "from pkg.a import X\nY = 2\n",
    })
    found = static("pkg")
    assert codes(found) == [("pkg/a.py", 2, 19, "VAI003")]
    assert "when 'pkg.b' is imported first: pkg.b:1 -> pkg.a:2 -> pkg.b" in found[0].message
    assert python_import(root, "pkg.a").returncode == 0
    assert "partially initialized module 'pkg.b'" in python_import(root, "pkg.b").stderr


def test_s12_an_order_the_parent_package_rules_out_is_not_reported(tree) -> None:
    root = tree({
        # pkg.b can never be the first of the cycle to run: pkg runs first and imports pkg.a
        "pkg/__init__.py": "import pkg.a\n",
        "pkg/a.py": "X = 1\nfrom pkg.b import Y\n",
        "pkg/b.py": "from pkg.a import X\nY = 2\n",
    })
    assert static("pkg") == []
    for module in ("pkg", "pkg.a", "pkg.b"):
        assert python_import(root, module).returncode == 0, module


def test_s12_parent_package_runs_first(tree) -> None:
    root = tree({
        "pkg/__init__.py": "from pkg.sub.helper import helper\nVERSION = '1'\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/helper.py": "from pkg import VERSION\n\ndef helper():\n    return VERSION\n",
    })
    found = static("pkg")
    assert codes(found) == [("pkg/sub/helper.py", 1, 17, "VAI003")]
    assert "'VERSION' is bound at pkg/__init__.py:2" in found[0].message
    assert "partially initialized module 'pkg'" in python_import(root, "pkg.sub.helper").stderr


def test_s12_guarded_cycle_is_a_warning(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import g\nVALUE = 1\n",
        "pkg/b.py": """
            try:
                from pkg.a import VALUE
            except ImportError:
                VALUE = None
            def g(): ...
        """,
    })
    found = static("pkg")
    # Python survives both orders, with b.VALUE silently None: worth a warning, not an error.
    assert codes(found) == [("pkg/a.py", 1, 19, "VAI102"), ("pkg/b.py", 2, 23, "VAI102")]
    assert found[0].message.startswith("caught by except ImportError around pkg.b:2: ")
    assert "partially initialised module 'pkg.b'" in found[0].message
    assert found[1].message.startswith("guarded by except ImportError: ")
    assert "partially initialised module 'pkg.a'" in found[1].message
    for module in ("pkg.a", "pkg.b"):
        assert python_import(root, module).returncode == 0


# Imports every entry in a fresh module table; a failing `from X import n` line is then
# rewritten to `import X` (same module imports, same order, no name) and the round repeated,
# until no statement fails: the set of statements that fail one fix after another.
_GROUND_TRUTH = textwrap.dedent("""
    import json, pathlib, re, sys, traceback
    root, modules = sys.argv[1], sys.argv[2:]
    sys.path.insert(0, root)
    failures = set()
    while True:
        found = set()
        for entry in modules:
            for name in [m for m in sys.modules if m == "pkg" or m.startswith("pkg.")]:
                del sys.modules[name]
            try:
                __import__(entry)
            except ImportError as exc:
                assert "partially initialized" in str(exc), str(exc)
                frame = traceback.extract_tb(exc.__traceback__)[-1]
                found.add((frame.filename, frame.lineno))
        if not found:
            break
        for filename, lineno in found:
            path = pathlib.Path(filename)
            lines = path.read_text().splitlines()
            lines[lineno - 1] = re.sub(r"^from (\\S+) import .*", r"import \\1", lines[lineno - 1])
            path.write_text("\\n".join(lines) + "\\n")
            failures.add((filename[len(root) + 1:], lineno))
    print(json.dumps(sorted(failures)))
""")

# file under pkg/ -> (dotted module, prefix of the names it defines)
_MODULES = {
    "__init__.py": ("pkg", "ninit_"),
    "m0.py": ("pkg.m0", "n0_"),
    "m1.py": ("pkg.m1", "n1_"),
    "sub/__init__.py": ("pkg.sub", "nsub_"),
    "sub/m2.py": ("pkg.sub.m2", "n2_"),
}


def _module_bodies(draw) -> dict[str, list[str]]:
    """Each module defines its names once and imports others' names, in a random order."""
    bodies = {}
    for rel, (_, prefix) in _MODULES.items():
        stmts = [f"{prefix}{k} = 1" for k in range(2)]
        for _ in range(draw(st.integers(0, 3))):
            dotted, other_prefix = _MODULES[draw(st.sampled_from(sorted(_MODULES)))]
            kind = draw(st.sampled_from(["from", "from", "import", "deferred"]))
            name = f"{other_prefix}{draw(st.integers(0, 1))}"
            if kind == "from":
                stmts.append(f"from {dotted} import {name}")
            elif kind == "import":
                stmts.append(f"import {dotted}")
            else:
                stmts.append(f"def f_{len(stmts)}():\n    from {dotted} import {name}")
        bodies[rel] = draw(st.permutations(stmts))
    return bodies


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_s12_static_cycle_findings_match_python_in_every_import_order(tmp_path_factory,
                                                                      data) -> None:
    root = tmp_path_factory.mktemp("cycles")
    bodies = _module_bodies(data.draw)
    for rel, stmts in bodies.items():
        path = root / "pkg" / rel
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(stmts) + "\n")
    found = verify_static([str(root / "pkg")]).findings  # before the harness edits the files
    entries = [dotted for dotted, _ in _MODULES.values()]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-c", _GROUND_TRUTH, str(root), *entries],
                         capture_output=True, text=True, env=env, timeout=60, check=True).stdout
    python_says = {tuple(x) for x in json.loads(out)}
    assert {f.code for f in found} <= {"VAI003"}, found
    static_says = {(str(Path(f.path).relative_to(root)) if Path(f.path).is_absolute()
                    else f.path, f.line) for f in found}
    assert static_says == python_says, (bodies, found)


# -- S13 ---------------------------------------------------------------------------------------

S13_TREE = {
    "pkg/__init__.py": "from pkg.core import run\nNAME = 'pkg'\n",
    "pkg/core.py": """
        from pkg import NAME
        from pkg.util import missing_helper
        def run(): ...
    """,
    "pkg/util.py": "from .gone import x\nimport pkg.sub.deep\n",
    "pkg/sub/__init__.py": "from ..core import run, nothing_here\n",
    "pkg/sub/deep.py": """
        from .. import util
        from ...outside import y
        def f():
            from pkg.sub import nope
    """,
}


def test_s13_one_file_gives_the_same_findings_as_the_whole_tree(tree) -> None:
    root = tree(S13_TREE)
    whole = static("pkg")
    assert {f.code for f in whole} == {"VAI001", "VAI002", "VAI003"}
    for rel in S13_TREE:
        expected = [f for f in whole if f.path == rel]
        assert static(rel) == expected, rel
        assert static(str(root / rel)) == expected, rel  # absolute path, as pre-commit may pass
    assert static("pkg/sub") == [f for f in whole if f.path.startswith("pkg/sub/")]
    several = static("pkg/core.py", "pkg/sub/deep.py")
    assert several == [f for f in whole if f.path in ("pkg/core.py", "pkg/sub/deep.py")]
