"""`vam verify-imports` on the command line: formats, exit codes, targets, settings."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from migrator.cli import main

BROKEN = {
    "pkg/__init__.py": "",
    "pkg/kv/__init__.py": "",
    "pkg/kv/impl.py": "class Connector: ...\n",
    "pkg/user.py": "from pkg.kv import Connector\n",
}


def vam(*args: str):
    return CliRunner().invoke(main, ["verify-imports", *args])


def test_text_format_and_exit_1(tree) -> None:
    tree(BROKEN)
    result = vam("pkg")
    assert result.exit_code == 1
    assert result.stdout == (
        "pkg/user.py:1:20: VAI001 cannot import name 'Connector' from 'pkg.kv' "
        "(pkg/kv/__init__.py defines no 'Connector'); did you mean pkg.kv.impl.Connector? "
        "(a guess: same name elsewhere)\n"
    )
    # Issue 19: the count after "in" is of files with an error; the scanned ones are labelled.
    assert result.stderr.startswith(
        "vam verify-imports (static): 1 error, 0 warnings in 1 file; 4 files scanned (")


def test_json_format(tree) -> None:
    tree(BROKEN)
    result = vam("--format", "json", "pkg")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == [{
        "path": "pkg/user.py", "line": 1, "column": 20, "code": "VAI001", "severity": "error",
        "message": "cannot import name 'Connector' from 'pkg.kv' (pkg/kv/__init__.py defines "
                   "no 'Connector'); did you mean pkg.kv.impl.Connector? "
                   "(a guess: same name elsewhere)",
        "module": "pkg.kv", "name": "Connector", "suggestion": "pkg.kv.impl.Connector",
    }]
    # Issue 19: the summary goes to stderr in every format (stdout stays the report), as
    # `vam check` does; -q leaves it out.
    assert result.stderr.startswith("vam verify-imports (static): 1 error, 0 warnings in 1 file;")
    assert vam("-q", "--format", "json", "pkg").stderr == ""


@pytest.mark.parametrize("fmt", ["text", "json", "github", "sarif"])
def test_the_summary_counts_files_with_errors_in_every_format(tree, fmt: str) -> None:
    tree({**BROKEN, "pkg/user2.py": "from pkg.kv import Connector\nfrom pkg.kv import Other\n"})
    result = vam("--format", fmt, "pkg")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "vam verify-imports (static): 3 errors, 0 warnings in 2 files; 5 files scanned (")
    assert result.stderr.count("\n") == 1
    assert "vam verify-imports" not in result.stdout


def test_github_format(tree) -> None:
    tree({**BROKEN, "pkg/lazy.py": "def __getattr__(name): ...\n",
          "pkg/user2.py": "from pkg.lazy import thing\n"})
    result = vam("--format", "github", "pkg")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("::error file=pkg/user.py,line=1,col=20,title=VAI001::VAI001 "
                               "cannot import name 'Connector'")
    assert lines[1].startswith("::warning file=pkg/user2.py,line=1,col=22,title=VAI100::VAI100 ")


def test_clean_tree_and_warnings_only_exit_0(tree) -> None:
    tree({"pkg/__init__.py": "def __getattr__(name): ...\n", "pkg/a.py": "from pkg import b\n"})
    result = vam("pkg")
    assert result.exit_code == 0
    assert "VAI100" in result.stdout
    tree({"pkg/a.py": "from pkg import __getattr__\n"})
    result = vam("pkg")
    assert (result.exit_code, result.stdout) == (0, "")


@pytest.mark.parametrize(("args", "message"), [
    (["nowhere/pkg"], "vam: error: no such file, directory or importable package: nowhere/pkg"),
    (["README.md"], "vam: error: not a Python file: README.md"),
    (["--timeout", "0", "--dynamic", "pkg"], "vam: error: --timeout must be a positive number"),
    (["--python", "/no/such/python", "--dynamic", "pkg"],
     "vam: error: --python: no such interpreter: /no/such/python"),
])
def test_usage_errors_exit_2_with_one_line(tree, args: list[str], message: str) -> None:
    tree({**BROKEN, "README.md": "# hi\n"})
    result = vam(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(message)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize(("against", "message"), [
    ("", "vam: error: --against is empty: give a source tree, an sdist, a wheel, "
         "NAME==VERSION or REPO@REV"),
    ("vllm>=0.3", "vam: error: --against 'vllm>=0.3': expected NAME==VERSION"),
    ("vllm==", "vam: error: --against 'vllm==': expected NAME==VERSION"),
    ("vllm==banana", "vam: error: --against 'vllm==banana': 'banana' is not a version"),
])
def test_against_no_dist_is_a_usage_error_before_anything_is_read(
        tree, monkeypatch: pytest.MonkeyPatch, against: str, message: str) -> None:
    """An empty --against used to check the imports against the current folder."""
    import migrator.verify_imports

    def never(*_: object) -> None:
        raise AssertionError("read")

    monkeypatch.setattr(migrator.verify_imports, "load_dist", never)
    tree(BROKEN)
    result = vam("--against", against, "pkg")
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and result.stderr.startswith(message), result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_bad_settings_exit_2(tree) -> None:
    tree({**BROKEN, "pyproject.toml": "[tool.vam.verify-imports]\noptionals = ['x']\n"})
    result = vam("pkg")
    assert result.exit_code == 2
    assert "unknown [tool.vam.verify-imports] key(s): optionals" in result.stderr


def test_settings_generated_modules(tree) -> None:
    tree({"pkg/__init__.py": "", "pkg/ops.py": "from pkg._build_info import DEVICE\n"})
    assert vam("pkg").exit_code == 1
    assert vam("--generated", "pkg._build_info", "pkg").exit_code == 0
    tree({"pyproject.toml": "[tool.vam.verify-imports]\ngenerated = ['pkg._build_info']\n"})
    assert vam("pkg").exit_code == 0


def test_importable_package_name_and_default_target(tree, monkeypatch, tmp_path) -> None:
    root = tree(BROKEN)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.chdir(elsewhere)
    result = vam("pkg.kv", "pkg")  # names, not paths: found without importing them
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{root}/pkg/user.py:1:20: VAI001 ")
    monkeypatch.chdir(root)
    assert vam().stdout == vam("pkg").stdout  # default target: the current directory


def test_help_documents_every_code() -> None:
    from migrator.verify_imports import CODE_TITLES

    result = CliRunner().invoke(main, ["verify-imports", "--help"])
    assert result.exit_code == 0
    for code in CODE_TITLES:
        assert code in result.stdout


def test_python_m_migrator_entry_point(tree) -> None:
    root = tree(BROKEN)
    done = subprocess.run([sys.executable, "-m", "migrator", "verify-imports", "pkg"], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stdout.startswith("pkg/user.py:1:20: VAI001 ")


def test_summary_counts_files_with_errors_apart_from_files_scanned(tree) -> None:
    tree({**BROKEN, "pkg/user2.py": "from pkg.kv import Connector\nfrom pkg.kv import Other\n",
          "pkg/fine.py": "from pkg.kv.impl import Connector\n"})
    result = vam("pkg")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "vam verify-imports (static): 3 errors, 0 warnings in 2 files; 6 files scanned ("), \
        result.stderr
