"""VAI005: a directory without __init__.py inside a regular package imports fine from the source
tree, but setuptools' find_packages() leaves it out of the wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.verify_imports.vi_helpers import codes, python_import, static

LAYER = {
    "pkg/__init__.py": "",
    "pkg/models/__init__.py": "",
    "pkg/models/layer/attention.py": "class Attention: ...\n",
    "pkg/models/layer/deep/__init__.py": "",
    "pkg/models/layer/deep/rope.py": "from pkg.models.layer.attention import Attention\n",
    "pkg/user.py": """
        import os
        from pkg.models.layer.attention import Attention
        import pkg.models.layer.deep.rope
        from pkg.models import layer
        from pkg.models import Missing
    """,
}

SETUP_PY = "from setuptools import find_packages, setup\nsetup(packages=find_packages())\n"


def test_directory_without_init_in_a_regular_package_is_reported(tree) -> None:
    root = tree({**LAYER, "setup.py": SETUP_PY})
    found = static("pkg")
    assert codes(found) == [
        ("pkg/models/layer", 1, 1, "VAI005"),
        ("pkg/user.py", 2, 1, "VAI005"),
        ("pkg/user.py", 3, 8, "VAI005"),
        ("pkg/user.py", 4, 24, "VAI005"),
        ("pkg/user.py", 5, 24, "VAI001"),
    ]
    assert all(f.is_error for f in found)
    by_line = {(f.path, f.line): f for f in found}
    assert by_line["pkg/models/layer", 1].message == (
        "pkg/models/layer/ has no __init__.py but 'pkg.models' is a regular package: "
        "setup.py's find_packages() leaves it and everything below it out of the wheel")
    assert by_line["pkg/user.py", 2].message == (
        "'pkg.models.layer.attention' is not in the wheel: pkg/models/layer/ has no __init__.py "
        "(add one, or declare namespace packages: find_namespace_packages())")
    assert by_line["pkg/user.py", 2].module == "pkg.models.layer"
    # From the source tree every import works up to the deliberate VAI001 on line 5.
    error = python_import(root, "pkg.user").stderr.strip().splitlines()[-1]
    assert error.startswith("ImportError: cannot import name 'Missing' from 'pkg.models'")


def test_folder_is_reported_when_the_run_checks_an_importer_or_a_file_below_it(tree) -> None:
    tree({**LAYER, "pkg/models/data/table.py": "", "setup.py": SETUP_PY})
    assert codes(static("pkg/user.py"))[:2] == [
        ("pkg/models/layer", 1, 1, "VAI005"), ("pkg/user.py", 2, 1, "VAI005")]
    assert codes(static("pkg/__init__.py", "pkg/models/layer/deep/rope.py")) == [
        ("pkg/models/layer", 1, 1, "VAI005")]
    assert codes(static("pkg/__init__.py")) == []
    # A left-out folder nothing imports from (data, scripts shipped apart) is not a finding.
    assert "pkg/models/data" not in {f.path for f in static("pkg")}


@pytest.mark.parametrize(
    ("config", "reported"),
    [
        ({}, True),  # no packaging config at all: nothing declares namespace packages
        ({"setup.py": SETUP_PY}, True),
        ({"setup.py": "import setuptools\nsetuptools.setup(packages="
                      "setuptools.find_namespace_packages(include=['pkg*']))\n"}, False),
        ({"setup.cfg": "[metadata]\nname = pkg\n[options]\npackages = find:\n"}, True),
        ({"setup.cfg": "[metadata]\nname = pkg\n[options]\npackages = find_namespace:\n"}, False),
        ({"pyproject.toml": "[tool.setuptools.packages.find]\nnamespaces = false\n"}, True),
        ({"pyproject.toml": "[tool.setuptools.packages.find]\nnamespaces = true\n"}, False),
        # setuptools' default for packages.find is namespaces = true
        ({"pyproject.toml": "[tool.setuptools.packages.find]\ninclude = ['pkg*']\n"}, False),
        # [project] without package config: setuptools' auto-discovery finds namespace dirs
        ({"pyproject.toml": "[project]\nname = 'pkg'\nversion = '1'\n"}, False),
        # a pyproject.toml holding only tool settings declares nothing
        ({"pyproject.toml": "[tool.ruff]\nline-length = 99\n"}, True),
    ],
)
def test_packaging_config_that_ships_namespace_dirs_silences_it(tree, config, reported) -> None:
    tree({**LAYER, **config})
    found = [f for f in static("pkg") if f.code == "VAI005"]
    assert bool(found) is reported


def test_src_layout_reads_the_config_above_the_sys_path_root(tree) -> None:
    src = {f"src/{rel}": text for rel, text in LAYER.items()}
    tree({**src, "pyproject.toml": "[tool.setuptools.packages.find]\nwhere = ['src']\n"})
    assert [f for f in static("src/pkg") if f.code == "VAI005"] == []
    tree({"pyproject.toml": "[tool.setuptools.packages.find]\nwhere = ['src']\n"
                            "namespaces = false\n"})
    assert ("src/pkg/models/layer", 1, 1, "VAI005") in codes(static("src/pkg"))


def test_only_the_outermost_directory_is_reported(tree) -> None:
    tree({**LAYER, "pkg/models/layer/more/extra.py": "", "setup.py": SETUP_PY})
    dirs = [f.path for f in static("pkg") if f.path.startswith("pkg/models/")]
    assert dirs == ["pkg/models/layer"]


def test_built_wheel_really_lacks_the_module(tree, tmp_path: Path) -> None:
    """The ground truth behind VAI005: setuptools (from this venv, offline) builds the wheel."""
    root = tree({**LAYER, "setup.py": "from setuptools import find_packages, setup\n"
                 "setup(name='vam-tiny', version='0.1', packages=find_packages())\n"})
    out = tmp_path / "dist"
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "-q", "-w", str(out), str(root)],
                   check=True, env=env, capture_output=True, timeout=300)
    [wheel] = out.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"pkg/__init__.py", "pkg/models/__init__.py", "pkg/user.py"} <= names
    assert not [n for n in names if n.startswith("pkg/models/layer/")]
    assert ("pkg/models/layer", 1, 1, "VAI005") in codes(static("pkg"))
