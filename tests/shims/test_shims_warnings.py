"""The deprecation warning (S8 attribution): once per table row, at the user's line, with the
fix in the message; and the env var that turns it into an error or silences it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from shims_helpers import Tree, clean_env, line_of

FLAT_MESSAGE = (
    "acme.flat moved to acme.core.flat_impl in acme 2.0; the old path is deprecated and will "
    "be removed in 3.0. Run `vam migrate` to update your code (ACME_SHIMS=error turns this "
    "into an ImportError, ACME_SHIMS=ignore silences it)."
)


def test_one_warning_per_table_row_per_process(acme: Tree) -> None:
    proc = acme.run(
        """
        import importlib, warnings
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import acme.oldpkg
            import acme.oldpkg.sub
            from acme.oldpkg import deep
            importlib.import_module("acme.oldpkg.deep.leaf")
            import acme.flat
            from acme import flat
            from acme.utils import moved
            from acme.utils import moved
            import acme.utils
            acme.utils.moved
            from acme.utils import renamed_old
        for w in caught:
            print(w.message.old)
        """
    )
    assert proc.stdout.split() == ["acme.oldpkg", "acme.flat", "acme.utils.moved",
                                   "acme.utils.renamed_old"]  # fmt: skip


def test_message_and_attributes(acme: Tree) -> None:
    proc = acme.run(
        """
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import acme.flat
        (w,) = caught
        m = w.message
        assert (m.old, m.new, m.version, m.removal) == (
            "acme.flat", "acme.core.flat_impl", "2.0", "3.0"
        ), vars(m)
        print(str(m))
        """
    )
    assert proc.stdout.strip() == FLAT_MESSAGE


# One user line per form; the warning must name that line, whatever the import machinery,
# the shims or a by-name helper (mock, pickle) between it and the shim.
FORMS = {
    "import": "import acme.oldpkg",
    "from-import": "from acme.oldpkg import Thing",
    "submodule as": "import acme.oldpkg.deep.leaf as m",
    "from parent": "from acme import flat",
    "import_module": "importlib.import_module('acme.flat')",
    "__import__": "__import__('acme.flat')",
    "symbol": "from acme.utils import moved",
    "symbol attribute": "acme.utils.moved",
    "symbol on package": "from acme import hook",
    "mock.patch": "with mock.patch('acme.flat.func'): pass",
    "pickle": "pickle.loads(b'cacme.flat\\nThing\\n.')",
}


@pytest.mark.parametrize("form", FORMS.values(), ids=list(FORMS))
def test_attributed_to_the_users_line(acme: Tree, form: str) -> None:
    script = acme.script(
        f"""
        import importlib, pickle, warnings
        from unittest import mock
        import acme.utils
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            {form}  # the user's line
        (w,) = caught
        print(w.filename, w.lineno)
        """
    )
    proc = acme.run_file(script)
    assert proc.stdout.split() == [str(script), str(line_of(script, "# the user's line"))]


def test_attributed_to_the_importing_library_module(acme: Tree) -> None:
    acme.write({"mylib.py": "import os\n\nfrom acme.oldpkg import sub  # lib line\n"})
    proc = acme.run(
        """
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import mylib
        (w,) = caught
        print(w.filename, w.lineno)
        """
    )
    mylib = acme.root / "mylib.py"
    assert proc.stdout.split() == [str(mylib), str(line_of(mylib, "# lib line"))]


def test_shown_once_by_default_filters_at_the_users_line(acme: Tree) -> None:
    # No filter set by the script: Python's defaults show DeprecationWarning for __main__.
    script = acme.script("import acme.flat  # here\nimport acme.flat\n")
    proc = acme.run_file(script)
    line = line_of(script, "# here")
    assert proc.stderr.startswith(f"{script}:{line}: MovedNameWarning: {FLAT_MESSAGE}\n")
    assert proc.stderr.count("MovedNameWarning") == 1


@pytest.mark.parametrize(
    "statement", ["import acme.flat", "from acme.utils import moved", "from acme import hook"]
)
def test_w_error_raises_at_the_import(acme: Tree, statement: str) -> None:
    script = acme.script(
        f"""
        import shims
        for attempt in range(2):
            try:
                {statement}  # raises
            except shims.MovedNameWarning as exc:
                print("raised", attempt)
        {statement}  # uncaught
        """
    )
    proc = acme.run_file(script, flags=("-W", "error::DeprecationWarning"), check=False)
    assert proc.returncode == 1
    # Every attempt raises: a warning turned into an error does not count as shown.
    assert proc.stdout.split() == ["raised", "0", "raised", "1"]
    traceback = proc.stderr.splitlines()
    assert traceback[1] == f'  File "{script}", line {line_of(script, "# uncaught")}, in <module>'
    assert traceback[-1].startswith("shims.MovedNameWarning: ")


def test_error_mode_raises_import_error_with_the_same_message(acme: Tree) -> None:
    proc = acme.run(
        """
        import sys
        import shims
        try:
            import acme.flat
        except ImportError as exc:
            assert type(exc) is shims.MovedNameError and exc.name == "acme.flat"
            print(exc)
        else:
            raise AssertionError("old path imported in error mode")
        assert "acme.flat" not in sys.modules
        for statement in ("from acme.utils import moved", "from acme import hook",
                          "import acme.oldpkg.sub", "from acme.oldpkg import sub"):
            try:
                exec(statement)
            except shims.MovedNameError:
                pass
            else:
                raise AssertionError(statement)
        from acme.utils import kept  # names that stayed are unaffected
        import acme.core.flat_impl  # and so are new paths
        """,
        env={"ACME_SHIMS": " Error "},
    )
    assert proc.stdout.strip() == FLAT_MESSAGE


@pytest.mark.parametrize("value", ["ignore", "IGNORE"])
def test_ignore_mode_is_silent_even_under_w_error(acme: Tree, value: str) -> None:
    acme.run(
        """
        import acme.flat, acme.oldpkg.sub
        from acme.utils import moved
        from acme import hook
        import acme.core.flat_impl
        assert acme.flat is acme.core.flat_impl
        """,
        env={"ACME_SHIMS": value},
        flags=("-W", "error"),
    )


@pytest.mark.parametrize("value", ["warn", ""])
def test_warn_mode_spelled_out_or_empty(acme: Tree, value: str) -> None:
    proc = acme.run("import acme.flat\n", env={"ACME_SHIMS": value})
    assert proc.stderr.count("MovedNameWarning") == 1


def test_invalid_value_is_a_clear_error(acme: Tree) -> None:
    proc = acme.run("import acme\n", env={"ACME_SHIMS": "loud"}, check=False)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        "shims.ShimsConfigError: ACME_SHIMS='loud' is not valid: "
        "use 'warn' (the default), 'error' or 'ignore'"
    )


def test_env_var_argument_overrides_the_tables(tree: Tree) -> None:
    tree.write(
        {
            "own/rules.toml": """
                [pack]
                name = "own"
                shims-env = "IGNORED_SHIMS"
                [[step]]
                version = "1.0"
                [[step.module]]
                old = "own.a"
                new = "own.b"
            """,
            "own/__init__.py": (
                "import os, shims\n"
                "shims.install(os.path.join(os.path.dirname(__file__), 'rules.toml'),"
                " env_var='CUSTOM_SHIMS')\n"
            ),
            "own/b.py": "",
        }
    )
    proc = tree.run(
        """
        try:
            import own.a
        except ImportError as exc:
            print(exc)
        """,
        env={"CUSTOM_SHIMS": "error", "IGNORED_SHIMS": "ignore"},
    )
    assert "CUSTOM_SHIMS=error" in proc.stdout
    assert "removed in a future release" in proc.stdout  # the step has no removal version


def test_warns_for_code_without_a_source_file(acme: Tree) -> None:
    # `python -c` code has no loader that can give source: the warning must still be shown.
    proc = subprocess.run(
        [sys.executable, "-c", "import acme.flat"],
        cwd=acme.root,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(f"<string>:1: MovedNameWarning: {FLAT_MESSAGE}")
