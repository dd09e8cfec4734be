"""Symbol moves (S5): the old module stays a real module and forwards only the moved names."""

from __future__ import annotations

import pytest
from shims_helpers import Tree, line_of

# Each prelude leaves the stay-put module in a different state before the first use.
ORDERS = {
    "cold": "pass",
    "stay-put module imported first by unrelated code": "from acme.utils import kept",
    "new module first": "import acme.core.helpers",
    "after importlib.reload": "import importlib, acme.utils; importlib.reload(acme.utils)",
    "after reloading the new module": (
        "import importlib, acme.core.helpers; importlib.reload(acme.core.helpers)"
    ),
}


@pytest.mark.parametrize("prelude", ORDERS.values(), ids=list(ORDERS))
def test_moved_name_in_every_import_order(acme: Tree, prelude: str) -> None:
    script = acme.script(
        f"""
        import sys, warnings
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as before:
            {prelude}
        assert not before, before
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from acme.utils import moved  # first use
            from acme.utils import moved as again
            import acme.utils
            via_attribute = acme.utils.moved
        import acme.core.helpers as new
        assert moved is again is via_attribute is new.moved
        (w,) = caught
        assert w.category.__name__ == "MovedNameWarning", w
        assert issubclass(w.category, DeprecationWarning)
        print(w.filename, w.lineno)
        """
    )
    proc = acme.run_file(script)
    filename, lineno = proc.stdout.split()
    assert filename == str(script)
    assert int(lineno) == line_of(script, "# first use")


def test_stay_put_name_imports_without_warning(acme: Tree) -> None:
    acme.run(
        """
        import warnings
        warnings.simplefilter("error")
        from acme.utils import kept
        import acme.utils
        assert kept() == "kept" and acme.utils.kept is kept
        """
    )


def test_unknown_names_still_raise_attribute_error(acme: Tree) -> None:
    acme.run(
        """
        import acme.utils
        try:
            acme.utils.no_such_name
        except AttributeError as exc:
            assert str(exc) == "module 'acme.utils' has no attribute 'no_such_name'", exc
        else:
            raise AssertionError("unknown name resolved")
        assert getattr(acme.utils, "no_such_name", 7) == 7
        assert not hasattr(acme.utils, "no_such_name")
        try:
            from acme.utils import no_such_name
        except ImportError as exc:
            assert "cannot import name 'no_such_name'" in str(exc), exc
        else:
            raise AssertionError("unknown name imported")
        """
    )


def test_dir_lists_moved_names(acme: Tree) -> None:
    acme.run(
        """
        import acme, acme.utils
        names = dir(acme.utils)
        assert {"kept", "moved", "renamed_old"} <= set(names), names
        assert names == sorted(names)
        assert "hook" in dir(acme)
        """
    )


def test_renamed_symbol(acme: Tree) -> None:
    acme.run(
        """
        from acme.utils import renamed_old
        from acme.core.helpers import renamed_new
        assert renamed_old is renamed_new
        """
    )


def test_symbol_moved_off_the_installing_package(acme: Tree) -> None:
    acme.run(
        """
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from acme import hook
        import acme.core
        assert hook is acme.core.hook
        assert [w.message.old for w in caught] == ["acme.hook"]
        """
    )


def test_forwarding_follows_patches_of_the_new_name(acme: Tree) -> None:
    # The old name is looked up on each use, never cached: patching or reloading the new
    # module is what the old name serves.
    acme.run(
        """
        from unittest import mock
        import acme.utils
        with mock.patch("acme.core.helpers.moved", return_value="patched"):
            assert acme.utils.moved() == "patched"
        assert acme.utils.moved() == "moved"
        """
    )


def test_install_after_the_stay_put_module_was_imported(tree: Tree) -> None:
    tree.write(
        {
            "late/rules.toml": """
                [pack]
                name = "late"
                [[step]]
                version = "1.0"
                [[step.symbol]]
                old = "late.utils.f"
                new = "late.helpers.f"
            """,
            "late/__init__.py": "",
            "late/utils.py": "def g():\n    return 'g'\n",
            "late/helpers.py": "def f():\n    return 'f'\n",
        }
    )
    tree.run(
        """
        import late.utils
        assert not hasattr(late.utils, "f")
        import shims
        shims.install("late/rules.toml")
        import late.helpers
        assert late.utils.f is late.helpers.f
        """
    )


def test_module_with_its_own_getattr_keeps_it(tree: Tree) -> None:
    tree.write(
        {
            "own/rules.toml": """
                [pack]
                name = "own"
                [[step]]
                version = "1.0"
                [[step.symbol]]
                old = "own.utils.f"
                new = "own.helpers.f"
            """,
            "own/__init__.py": (
                "import os, shims\n"
                "shims.install(os.path.join(os.path.dirname(__file__), 'rules.toml'))\n"
            ),
            "own/utils.py": """
                LOADS = globals().get("LOADS", 0) + 1

                def __getattr__(name):
                    if name == "dynamic":
                        return 42
                    raise AttributeError(f"custom: {name}")

                def __dir__():
                    return ["dynamic", "LOADS"]
            """,
            "own/helpers.py": "def f():\n    return 'f'\n",
        }
    )
    tree.run(
        """
        import importlib
        import own.utils, own.helpers
        for _ in range(2):
            assert own.utils.dynamic == 42
            assert own.utils.f is own.helpers.f
            try:
                own.utils.nope
            except AttributeError as exc:
                assert str(exc) == "custom: nope", exc
            assert set(dir(own.utils)) == {"dynamic", "LOADS", "f"}, dir(own.utils)
            importlib.reload(own.utils)
        assert own.utils.LOADS == 3  # first load and two reloads
        """
    )


def test_host_keeps_its_loader_and_spec(acme: Tree) -> None:
    acme.run(
        """
        import importlib.machinery, inspect
        import acme.utils
        assert type(acme.utils.__loader__) is importlib.machinery.SourceFileLoader
        assert acme.utils.__spec__.loader is acme.utils.__loader__
        assert "def kept" in inspect.getsource(acme.utils)
        """
    )


VA_ORDERS = {
    "cold": "pass",
    "utils imported first": "import vllm_ascend.distributed.utils",
    "new module first": "import vllm_ascend.distributed.kv_transfer.utils.utils",
    "after importlib.reload": (
        "import importlib, vllm_ascend.distributed.utils as u; importlib.reload(u)"
    ),
}


@pytest.mark.parametrize("prelude", VA_ORDERS.values(), ids=list(VA_ORDERS))
def test_vllm_ascend_utils_split_import(va_layout: tuple[Tree, object], prelude: str) -> None:
    """S5 on the bundled table: the mixed import of case 17 (a moved helper and the one
    that stays) works in every order, with one warning, for the moved name only."""
    tree, _ = va_layout
    script = tree.script(
        f"""
        import warnings
        {prelude}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from vllm_ascend.distributed.utils import (  # the import
                fc3_all_gather_and_maybe_unpad_impl,
                align_memory,
            )
            from vllm_ascend.distributed.utils import align_memory as again
        import vllm_ascend.distributed.kv_transfer.utils.utils as new
        import vllm_ascend.distributed.utils as utils
        assert align_memory is again is new.align_memory
        assert fc3_all_gather_and_maybe_unpad_impl is utils.fc3_all_gather_and_maybe_unpad_impl
        assert "align_memory" in dir(utils) and not hasattr(utils, "no_such_helper")
        (w,) = caught
        assert w.message.old == "vllm_ascend.distributed.utils.align_memory", w
        assert "0.14.0" in str(w.message) and "0.16.0" in str(w.message)
        print(w.lineno)
        """
    )
    proc = tree.run_file(script)
    assert int(proc.stdout) == line_of(script, "# the import")
