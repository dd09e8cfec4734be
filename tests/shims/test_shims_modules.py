"""Module moves: every import form of an old path gives the same module object as the new one."""

from __future__ import annotations

import pytest
from shims_helpers import Tree


@pytest.mark.parametrize(
    "form",
    [
        "import acme.oldpkg as m",
        "import acme.oldpkg; m = acme.oldpkg",
        "from acme import oldpkg as m",
        "import importlib; m = importlib.import_module('acme.oldpkg')",
        "m = __import__('acme.oldpkg', fromlist=['x'])",
    ],
)
def test_old_package_is_the_new_module(acme: Tree, form: str) -> None:
    acme.run(
        f"""
        import sys
        {form}
        import acme.core.newpkg as new
        assert m is new
        assert sys.modules["acme.oldpkg"] is sys.modules["acme.core.newpkg"]
        # The module keeps its identity: name and spec are the new ones.
        assert m.__name__ == "acme.core.newpkg", m.__name__
        assert m.__spec__.name == "acme.core.newpkg", m.__spec__
        assert m.__spec__.loader is m.__loader__
        """
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("acme.oldpkg.sub", "acme.core.newpkg.sub"),
        ("acme.oldpkg.deep", "acme.core.newpkg.deep"),
        ("acme.oldpkg.deep.leaf", "acme.core.newpkg.deep.leaf"),
        ("acme.flat", "acme.core.flat_impl"),
        # intermediate path inside a real, new package
        ("acme.core.interim", "acme.core.newpkg.sub"),
    ],
)
def test_old_submodule_forms(acme: Tree, old: str, new: str) -> None:
    parent, _, leaf = old.rpartition(".")
    acme.run(
        f"""
        import importlib, sys
        import {old} as a
        from {parent} import {leaf} as b
        c = importlib.import_module({old!r})
        from {old} import Thing, func
        import {new} as n
        assert a is b is c is n is sys.modules[{old!r}]
        assert Thing is n.Thing and func is n.func
        assert n.__name__ == {new!r}
        """
    )


def test_attribute_chain_after_import(acme: Tree) -> None:
    acme.run(
        """
        import acme.oldpkg.deep.leaf
        import acme.core.newpkg.deep.leaf as leaf
        assert acme.oldpkg.deep.leaf is leaf
        assert acme.oldpkg.deep.leaf.func() == "acme.core.newpkg.deep.leaf"
        """
    )


def test_importing_new_first_then_old(acme: Tree) -> None:
    acme.run(
        """
        import acme.core.newpkg.sub as first
        import acme.oldpkg.sub as second
        assert first is second
        """
    )


def test_whole_components_only(acme: Tree) -> None:
    # `acme.oldpkg_extra` shares a prefix with `acme.oldpkg` but is its own real module.
    acme.run(
        """
        import sys, warnings
        warnings.simplefilter("error")
        import acme.oldpkg_extra as extra
        assert extra.__name__ == "acme.oldpkg_extra"
        assert "acme.core.newpkg" not in sys.modules
        try:
            import acme.oldpkg.missing
        except ModuleNotFoundError as exc:
            pass
        else:
            raise AssertionError("a submodule that exists under neither name imported")
        """,
        check=True,
        env={"ACME_SHIMS": "ignore"},
    )


def test_missing_submodule_is_missing_under_the_name_the_user_wrote(acme: Tree) -> None:
    proc = acme.run(
        """
        import importlib.util
        assert importlib.util.find_spec("acme.oldpkg.missing") is None
        import acme.oldpkg.missing
        """,
        check=False,
        env={"ACME_SHIMS": "ignore"},
    )
    assert "ModuleNotFoundError: No module named 'acme.oldpkg.missing'" in proc.stderr


def test_find_spec_neither_imports_nor_warns(acme: Tree) -> None:
    acme.run(
        """
        import importlib.util, sys, warnings
        import acme
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            spec = importlib.util.find_spec("acme.oldpkg")
        assert spec is not None and spec.name == "acme.oldpkg"
        assert "acme.core.newpkg" in spec.origin
        assert "acme.core.newpkg" not in sys.modules and not caught
        """
    )


def test_reload_through_the_old_name_reloads_the_new_module(acme: Tree) -> None:
    acme.run(
        """
        import importlib, sys
        import acme.oldpkg.sub as m
        m.func = None
        again = importlib.reload(m)
        assert again is m is sys.modules["acme.core.newpkg.sub"] is sys.modules["acme.oldpkg.sub"]
        assert m.func() == "acme.core.newpkg.sub"
        """
    )


def test_isinstance_across_names(acme: Tree) -> None:
    acme.run(
        """
        from acme.oldpkg.sub import Thing as OldThing
        from acme.core.newpkg.sub import Thing
        assert isinstance(Thing(), OldThing) and OldThing is Thing
        """
    )


def test_install_is_idempotent(acme: Tree) -> None:
    acme.run(
        """
        import importlib, os, sys
        import acme, shims
        finder = shims.installed()
        assert len(finder) == 1
        again = shims.install(os.path.join(os.path.dirname(acme.__file__), "rules.toml"))
        assert [again] == finder == shims.installed()
        importlib.reload(acme)
        assert shims.installed() == finder
        assert sys.meta_path[0] is finder[0]
        """
    )


def test_a_changed_table_replaces_the_finder(acme: Tree) -> None:
    acme.run(
        """
        import dataclasses
        import acme, shims
        (first,) = shims.installed()
        second = shims.install(first.pack, env_var="OTHER_SHIMS")
        assert second is not first and shims.installed() == [second]
        assert second.env_var == "OTHER_SHIMS"
        """
    )


def test_later_step_wins_and_reused_names_are_real(tree: Tree) -> None:
    """Two steps: a later release reuses a name an earlier step moved away. At run time
    only the newest layout exists, so the reused name is the real module, and a name from
    before both steps chains through them."""
    tree.write(
        {
            "two/rules.toml": """
                [pack]
                name = "two"
                [[step]]
                version = "1.0"
                removal = "3.0"
                [[step.module]]
                old = "two.a.config"
                new = "two.b.config"
                [[step.module]]
                old = "two.b.meta"
                new = "two.c.meta"
                intermediate = true
                [[step]]
                version = "2.0"
                removal = "4.0"
                [[step.module]]
                old = "two.b.config"
                new = "two.b.meta"
            """,
            "two/__init__.py": """
                import os, shims
                shims.install(os.path.join(os.path.dirname(__file__), "rules.toml"))
            """,
            "two/b/__init__.py": "",
            "two/b/meta.py": "WHO = 'b.meta'\n",
            "two/c/__init__.py": "",
            "two/c/meta.py": "WHO = 'c.meta'\n",
        }
    )
    tree.run(
        """
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import two.b.meta as real
            assert real.WHO == "b.meta" and not caught, caught
            import two.a.config as chained
            import two.b.config as renamed
        assert chained is renamed is real
        assert sorted((w.message.old, w.message.version) for w in caught) == [
            ("two.a.config", "1.0"), ("two.b.config", "2.0")
        ]
        """,
        env={"TWO_SHIMS": ""},
    )


def test_leftover_directory_at_an_old_path_does_not_shadow_the_shim(acme: Tree) -> None:
    # After a `git pull` the old package directory often survives with only __pycache__ in
    # it: a namespace package candidate. The shims answer first.
    (acme.root / "acme/oldpkg/__pycache__").mkdir(parents=True)
    acme.run(
        """
        import acme.oldpkg, acme.core.newpkg
        assert acme.oldpkg is acme.core.newpkg
        """,
        env={"ACME_SHIMS": "ignore"},
    )
