"""The shim runtime `vam refactor` writes into the package: the package keeps its old paths in
an interpreter where vam is not installed at all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import shims
from migrator.refactor import runtime
from tests.refactor.conftest import vam

USER = """\
import pkg.old.conn
from pkg.old.helper import h
"""


def _bare_python(root: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter with no site-packages and no PYTHONPATH (`-I -S`): the stdlib and
    ROOT only, so neither vam nor anything installed with it can be imported."""
    script = f"import sys\nsys.path.insert(0, {str(root)!r})\n{code}"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PKG_"))}
    return subprocess.run([sys.executable, "-I", "-S", "-c", script], capture_output=True,
                          text=True, env={**clean, **env}, cwd=root, check=False, timeout=60)


@pytest.fixture
def refactored(repo: Path, table: Path) -> Path:
    result = vam("refactor", "--rules", str(table), "--step", "1.0", str(repo))
    assert result.exit_code == 0, result.output
    (repo / "user_code.py").write_text(USER)
    return repo


def test_old_paths_work_where_vam_is_not_installed(refactored: Path) -> None:
    probe = _bare_python(refactored, (
        "import importlib.util, warnings\n"
        "assert all(importlib.util.find_spec(n) is None for n in ('shims', 'rules', 'migrator'))\n"
        "warnings.simplefilter('always', DeprecationWarning)\n"
        "import user_code\n"
        "import pkg.new.sub.conn as new\n"
        "assert user_code.pkg.old.conn is new and user_code.h() == 1\n"
        "from pkg.new.tools import moved_fn\n"
        "from pkg.util import moved\n"
        "assert moved is moved_fn\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('shims', 'rules')))\n"
    ))
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "[]"
    # the warning names the user's line, not the runtime's or importlib's
    assert f"{refactored / 'user_code.py'}:1: MovedNameWarning: pkg.old moved to pkg.new.sub " \
        "in pkg 1.0" in probe.stderr, probe.stderr
    assert "_vam_shims" not in probe.stderr


def test_the_env_var_of_the_pack_still_rules(refactored: Path) -> None:
    error = _bare_python(refactored, "import pkg.old.conn\n", PKG_SHIMS="error")
    assert error.returncode == 1
    assert "MovedNameError: pkg.old moved to pkg.new.sub in pkg 1.0" in error.stderr
    quiet = _bare_python(refactored, "import pkg.old.conn\n", PKG_SHIMS="ignore")
    assert quiet.returncode == 0 and quiet.stderr == ""
    bad = _bare_python(refactored, "import pkg\n", PKG_SHIMS="loud")
    assert bad.returncode == 1 and "ShimsConfigError: PKG_SHIMS='loud' is not valid" in bad.stderr


def test_the_runtime_is_vams_own_shims_code(refactored: Path) -> None:
    """Copied, not rewritten: each module is vam's, a header and the relative `rules` import
    aside."""
    copy = refactored / "pkg" / "_vam_shims"
    for source in sorted(Path(shims.__file__).parent.glob("*.py")):
        text = source.read_text(encoding="utf-8")
        text = text.replace("from rules import", "from ..rules import")
        copied = (copy / "shims" / source.name).read_text(encoding="utf-8")
        assert copied.startswith("# vam: ignore-file\n") and copied.endswith(text)
    assert (copy / "rules" / "schema.py").is_file() and not list(copy.rglob("*.toml"))


def test_a_non_stdlib_import_cannot_be_copied() -> None:
    with pytest.raises(runtime.RuntimeCopyError, match=r"shims/x.py:2: imports libcst"):
        runtime._relative_imports("import os\nimport libcst\n", "shims/x.py")
