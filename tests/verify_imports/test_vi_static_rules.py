"""What counts as bound, what is checked where, and the warnings that stand for "unknown"."""

from __future__ import annotations

from tests.verify_imports.vi_helpers import codes, python_import, static


def test_type_checking_imports_are_checked_and_typing_only_names_are_not_runtime(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        "pkg/types.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from pkg.impl import Impl
            else:
                Other = object
        """,
        "pkg/impl.py": "class Impl: ...\n",
        "pkg/user.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from pkg.types import Impl, Other  # fine for a type checker
                from pkg.impl import Missing
            from pkg.types import Impl as RuntimeImpl
        """,
    })
    found = static("pkg")
    assert codes(found) == [("pkg/user.py", 4, 26, "VAI001"), ("pkg/user.py", 5, 23, "VAI001")]
    assert "pkg/types.py binds 'Impl' only under TYPE_CHECKING" in found[1].message
    assert found[1].suggestion == "pkg.impl.Impl"
    assert "cannot import name 'Impl'" in python_import(root, "pkg.user").stderr


def test_imports_inside_functions_and_classes_are_checked(tree) -> None:
    tree({
        "pkg/__init__.py": "",
        "pkg/a.py": """
            class Holder:
                from pkg.b import nothing

            def later():
                if True:
                    import pkg.b.not_a_module
        """,
        "pkg/b.py": "",
    })
    assert codes(static("pkg")) == [("pkg/a.py", 2, 23, "VAI001"), ("pkg/a.py", 6, 16, "VAI002")]


def test_every_binding_form_counts(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        "pkg/defs.py": """
            import os.path
            import json as js
            from collections import OrderedDict as OD
            a = b = 1
            (c, [d, *e]) = (1, [2, 3])
            f: int = 1
            g: int
            g2 = 0
            g2 += 1
            for h in range(1): pass
            with open(__file__) as i: pass
            try:
                j = 1
            except Exception:
                j = None
            if a:
                k = 1
            else:
                l = 2
            while False:
                m = 1
            def n(): ...
            async def o(): ...
            class P: ...
            def setter():
                global q
                q = 1
        """,
        "pkg/user.py": """
            from pkg.defs import os, js, OD, a, b, c, d, e, f, g2, h, i, j, k, l, m, n, o, P, q
            from pkg.defs import __name__, __file__, __doc__
            from pkg import __path__
        """,
        "pkg/user2.py": "from pkg.defs import g\n",
    })
    # `g: int` alone binds nothing: Python agrees
    assert codes(static("pkg")) == [("pkg/user2.py", 1, 22, "VAI001")]
    assert "cannot import name 'g'" in python_import(root, "pkg.user2").stderr


def test_star_import_chains_resolve_transitively_and_respect_all(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        "pkg/a.py": "from .b import *\n",
        "pkg/b.py": "from pkg.c import *\nfrom pkg.d import *\n_hidden_b = 1\n",
        "pkg/c.py": "deep = 1\n_private = 2\n",
        "pkg/d.py": "__all__ = ['exported']\nexported = 1\nnot_exported = 2\n",
        "pkg/user.py": "from pkg.a import deep, exported\n",
        "pkg/bad.py": "from pkg.a import _private, not_exported, _hidden_b\n",
    })
    assert codes(static("pkg")) == [
        ("pkg/bad.py", 1, 19, "VAI001"),
        ("pkg/bad.py", 1, 29, "VAI001"),
        ("pkg/bad.py", 1, 43, "VAI001"),
    ]
    assert python_import(root, "pkg.user").returncode == 0
    assert "cannot import name '_private'" in python_import(root, "pkg.bad").stderr


def test_star_import_cycle_terminates(tree) -> None:
    tree({
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import *\nA = 1\n",
        "pkg/b.py": "from pkg.a import *\nB = 1\n",
        "pkg/user.py": "from pkg.a import B\nfrom pkg.b import nope\n",
    })
    assert codes(static("pkg")) == [("pkg/user.py", 2, 19, "VAI001")]


def test_unknown_names_are_warnings(tree) -> None:
    tree({
        "pkg/__init__.py": "",
        "pkg/star3p.py": "from os.path import *\n",
        "pkg/dyn.py": "for n in ('x', 'y'):\n    globals()[n] = n\n",
        "pkg/allonly.py": "__all__ = ['ghost']\n",
        "pkg/user.py": """
            from pkg.star3p import join
            from pkg.dyn import x
            from pkg.allonly import ghost
        """,
    })
    found = static("pkg")
    assert codes(found) == [
        ("pkg/user.py", 1, 24, "VAI101"),
        ("pkg/user.py", 2, 21, "VAI101"),
        ("pkg/user.py", 3, 25, "VAI103"),
    ]
    assert "star-imports third-party 'os.path'" in found[0].message
    assert all(f.severity == "warning" for f in found)


def test_guarded_first_party_imports_are_warnings(tree) -> None:
    tree({
        "pkg/__init__.py": "",
        "pkg/ops.py": """
            try:
                import pkg._C
                from pkg._build_info import DEVICE
            except ImportError:
                DEVICE = None
        """,
    })
    found = static("pkg")
    assert codes(found) == [("pkg/ops.py", 2, 12, "VAI102"), ("pkg/ops.py", 3, 5, "VAI102")]
    assert found[0].message.startswith("guarded by except ImportError: no module named 'pkg._C'")


def test_generated_and_compiled_modules_exist(tree) -> None:
    from migrator.verify_imports import verify_static

    root = tree({
        "pkg/__init__.py": "",
        "pkg/user.py": "from pkg._build_info import DEVICE\nfrom pkg._C import op\n",
    })
    (root / "pkg" / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    assert codes(static("pkg")) == [("pkg/user.py", 1, 1, "VAI002")]
    assert verify_static(["pkg"], generated=["pkg._build_info"]).findings == []


def test_syntax_errors_are_reported_and_do_not_cascade(tree) -> None:
    tree({
        "pkg/__init__.py": "",
        "pkg/broken.py": "def f(:\n",
        "pkg/user.py": "from pkg.broken import anything\nfrom pkg.nothing import x\n",
    })
    found = static("pkg")
    assert codes(found) == [("pkg/broken.py", 1, 7, "VAI004"), ("pkg/user.py", 2, 1, "VAI002")]


def test_import_of_a_name_as_if_it_were_a_module(tree) -> None:
    tree({
        "pkg/__init__.py": "",
        "pkg/utils.py": "def align_memory(): ...\n",
        "pkg/user.py": "import pkg.utils.align_memory\n",
    })
    found = static("pkg")
    assert codes(found) == [("pkg/user.py", 1, 8, "VAI002")]
    assert ("'pkg.utils' is not a package; 'align_memory' is a name in 'pkg.utils': use from "
            "pkg.utils import align_memory") in found[0].message


def test_namespace_packages_and_third_party_imports(tree) -> None:
    tree({
        # the packaging ships namespace folders, so pkg/ns/ is no VAI005 (test_vi_unpackaged)
        "pyproject.toml": "[tool.setuptools.packages.find]\nnamespaces = true\n",
        "pkg/__init__.py": "",
        "pkg/ns/mod.py": "X = 1\n",
        "pkg/user.py": """
            import numpy.not_checked
            from torch_npu import whatever
            from pkg.ns import mod
            from pkg.ns.mod import X
            from pkg.ns import missing
        """,
    })
    found = static("pkg")
    assert codes(found) == [("pkg/user.py", 5, 20, "VAI001")]
    assert "pkg/ns/ is a namespace package with no __init__.py" in found[0].message


def test_plain_directory_of_top_level_modules(tree) -> None:
    tree({
        "scripts/helper.py": "def helper(): ...\n",
        "scripts/run.py": "from helper import helper, missing\nfrom . import x\n",
    })
    found = static("scripts")
    assert codes(found) == [("scripts/run.py", 1, 28, "VAI001"), ("scripts/run.py", 2, 1, "VAI002")]
    assert "no known parent package" in found[1].message


def test_vam_ignore_pragma(tree) -> None:
    tree({
        "pkg/__init__.py": "",
        "pkg/user.py": """
            from pkg import a  # vam: ignore
            from pkg import b  # vam: ignore[VAI001]
            from pkg import c  # vam: ignore[VAI002]
        """,
    })
    assert codes(static("pkg")) == [("pkg/user.py", 3, 17, "VAI001")]


def test_encoding_cookie_and_bom(tree) -> None:
    root = tree({"pkg/__init__.py": "", "pkg/ok.py": "X = 1\n"})
    (root / "pkg" / "latin.py").write_bytes(
        b"# -*- coding: latin-1 -*-\nNAME = '\xe9'\nfrom pkg.ok import Y\n")
    (root / "pkg" / "bom.py").write_bytes(b"\xef\xbb\xbffrom pkg.ok import X, Z\n")
    assert codes(static("pkg")) == [
        ("pkg/bom.py", 1, 23, "VAI001"), ("pkg/latin.py", 3, 20, "VAI001")]


def test_same_package_name_under_two_roots_is_two_packages(tree) -> None:
    tree({
        "src/pkg/__init__.py": "",
        "src/pkg/real.py": "X = 1\n",
        "src/pkg/user.py": "from pkg.real import X\n",
        "fixtures/pkg/__init__.py": "",
        "fixtures/pkg/user.py": "from pkg.real import X\n",  # no real.py under this root
    })
    assert codes(static("src", "fixtures")) == [("fixtures/pkg/user.py", 1, 1, "VAI002")]


def test_type_checking_name_served_by_module_getattr_is_a_warning(tree) -> None:
    """PEP 562 lazy import: bound for type checkers only, served at run time by __getattr__."""
    root = tree({
        "pkg/__init__.py": "",
        "pkg/_impl.py": "class NPUPlatform: ...\ncurrent_platform = NPUPlatform()\n",
        "pkg/platform.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from pkg._impl import NPUPlatform
                current_platform: NPUPlatform
            def __getattr__(name):
                if name in ("NPUPlatform", "current_platform"):
                    from pkg import _impl
                    return getattr(_impl, name)
                raise AttributeError(name)
        """,
        "pkg/lazy.py": """
            from typing import TYPE_CHECKING
            from pkg._lazy import lazy_getattr as __getattr__
            if TYPE_CHECKING:
                from pkg._impl import NPUPlatform
        """,
        "pkg/_lazy.py": """
            def lazy_getattr(name):
                from pkg import _impl
                return getattr(_impl, name)
        """,
        "pkg/declared.py": "current_platform: int\n",
        "pkg/user.py": """
            from typing import TYPE_CHECKING
            from pkg.platform import NPUPlatform, current_platform
            from pkg.lazy import NPUPlatform as Lazy
            if TYPE_CHECKING:
                from pkg.platform import NPUPlatform as Typed
                from pkg.declared import current_platform as declared
        """,
    })
    found = static("pkg")
    assert codes(found) == [
        ("pkg/user.py", 2, 26, "VAI100"), ("pkg/user.py", 2, 39, "VAI100"),
        ("pkg/user.py", 3, 22, "VAI100"),
    ]
    assert "pkg/platform.py binds 'NPUPlatform' only under TYPE_CHECKING" in found[0].message
    assert "module-level __getattr__" in found[0].message
    assert python_import(root, "pkg.user").returncode == 0
