"""`vam verify-imports --against DIST`: a plugin's imports of a third-party package checked
against one release of it, given as a tree, an sdist, a wheel or NAME==VERSION."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrator.cli import main
from migrator.core.dists import DistError, open_dist
from migrator.verify_imports import dist_from_source, verify_against
from migrator.verify_imports.against import load_dist
from tests.verify_imports.conftest import Tree

# A release of `lib` in the shape of vLLM 0.11.1: vllm.utils split into submodules, one name
# still forwarded by a deprecation __getattr__, a closed lazy-name __getattr__ elsewhere.
LIB = {
    "lib/__init__.py": "",
    "lib/utils/__init__.py": """
        import warnings

        _DEPRECATED_MAPPINGS = {"get_port": "net"}

        def __getattr__(name):
            if name in _DEPRECATED_MAPPINGS:
                submodule = _DEPRECATED_MAPPINGS[name]
                warnings.warn(f"lib.utils.{name} is deprecated", DeprecationWarning)
                module = __import__(f"lib.utils.{submodule}", fromlist=[submodule])
                return getattr(module, name)
            raise AttributeError(name)

        def __dir__():
            return sorted(list(globals().keys()) + list(_DEPRECATED_MAPPINGS))

        def kept():
            return 1
    """,
    "lib/utils/net.py": "def get_port():\n    return 0\n",
    "lib/utils/math_utils.py": "def cdiv(a, b):\n    return -(-a // b)\n",
    "lib/engine.py": """
        def __getattr__(name):
            if name == "Processor":
                from .input_processor import InputProcessor
                import warnings
                warnings.warn("moved", DeprecationWarning)
                return InputProcessor
            raise AttributeError(name)
    """,
    "lib/input_processor.py": "class InputProcessor:\n    pass\n",
    "tests/__init__.py": "",
    "tests/helpers.py": "X = 1\n",
}

PLUGIN = """
    from unittest import mock

    from lib.utils import get_port
    from lib.utils import cdiv
    from lib.utils import kept
    from lib.utils.math_utils import cdiv as cdiv2
    from lib.engine import Processor
    import lib.gone
    from lib import utils
    try:
        from lib.old import thing
    except ImportError:
        thing = None
    from lib.utils import cdiv as c3  # vam: ignore[VAI001]
    import tests.helpers

    TARGET = mock.patch("lib.utils.math_utils.nothere")
    GOOD = mock.patch("lib.utils.math_utils.cdiv.__name__")
    OP = "lib.fused_op"
    PIECE = f"lib.utils.{TARGET}"
"""

EXPECTED = [
    ("plugin/mod.py", 3, 23, "VAI104"),
    ("plugin/mod.py", 4, 23, "VAI001"),
    ("plugin/mod.py", 7, 24, "VAI104"),
    ("plugin/mod.py", 8, 8, "VAI002"),
    ("plugin/mod.py", 11, 5, "VAI102"),
    ("plugin/mod.py", 17, 21, "VAI001"),
]


def _write(root: Path, files: dict[str, str]) -> None:
    import textwrap

    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def _encoded(files: dict[str, str]) -> dict[str, bytes]:
    import textwrap

    return {rel: textwrap.dedent(text).lstrip("\n").encode() for rel, text in files.items()}


def _sdist(folder: Path, name: str = "lib", version: str = "1.0") -> Path:
    archive = folder / f"{name}-{version}.tar.gz"
    top = f"{name}-{version}"
    members = {f"{top}/{rel}": data for rel, data in _encoded(LIB).items()}
    members[f"{top}/PKG-INFO"] = f"Name: {name}\nVersion: {version}\n".encode()
    with tarfile.open(archive, "w:gz") as tar:
        for member, data in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive


def _wheel(folder: Path) -> Path:
    archive = folder / "lib-1.0-py3-none-any.whl"
    with zipfile.ZipFile(archive, "w") as wheel:
        for rel, data in _encoded(LIB).items():
            if not rel.startswith("tests/"):
                wheel.writestr(rel, data)
        wheel.writestr("lib-1.0.dist-info/METADATA", "Name: lib\nVersion: 1.0\n")
    return archive


def _simple_index(root: Path, archive: Path, digest: str | None = None) -> str:
    """A PEP 503 simple index under `root` listing `archive`; its file:// URL."""
    page = root / "simple" / "lib"
    page.mkdir(parents=True)
    digest = digest or hashlib.sha256(archive.read_bytes()).hexdigest()
    page.joinpath("index.html").write_text(
        f'<html><body><a href="{archive.as_uri()}#sha256={digest}">{archive.name}</a>'
        '<a href="lib-0.9.tar.gz">lib-0.9.tar.gz</a></body></html>')
    return (root / "simple").as_uri()


def _findings(tree: Tree, dist_spec: str) -> list[tuple[str, int, int, str]]:
    tree({"plugin/__init__.py": "", "plugin/mod.py": PLUGIN})
    result = verify_against(load_dist(dist_spec), ["plugin"])
    return [(f.path, f.line, f.col, f.code) for f in result.findings]


def test_against_a_source_tree(tree: Tree, tmp_path: Path) -> None:
    _write(tmp_path / "lib-src", LIB)
    assert _findings(tree, str(tmp_path / "lib-src")) == EXPECTED


@pytest.mark.parametrize("build", [_sdist, _wheel])
def test_against_an_sdist_or_a_wheel(tree: Tree, tmp_path: Path, build: object) -> None:
    archives = tmp_path / "archives"
    archives.mkdir()
    assert callable(build)
    assert _findings(tree, str(build(archives))) == EXPECTED


def test_against_name_version_from_a_simple_index(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "served").mkdir()
    url = _simple_index(tmp_path / "index", _sdist(tmp_path / "served"))
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.setenv("VAM_SDIST_CACHE", str(tmp_path / "cache"))
    assert _findings(tree, "lib==1.0") == EXPECTED
    assert (tmp_path / "cache" / "lib-1.0.tar.gz").is_file()
    # The cached archive is read offline: the index is gone, the answer is the same.
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "nowhere").as_uri())
    assert open_dist("lib==1.0").version == "1.0"
    with pytest.raises(DistError, match="lists no sdist"):
        open_dist("lib==2.0", index_url=url)


def test_a_platform_wheel_is_never_fetched_but_read_from_the_cache(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # vLLM 0.15.0 shipped platform wheels only: the index offers nothing vam downloads, and
    # the error says where a wheel fetched by hand is read from.
    (tmp_path / "served").mkdir()
    platform = _wheel(tmp_path / "served").rename(
        tmp_path / "served" / "lib-1.0-cp38-abi3-manylinux_2_31_x86_64.whl")
    url = _simple_index(tmp_path / "index", platform)
    cache = tmp_path / "cache"
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.setenv("VAM_SDIST_CACHE", str(cache))
    with pytest.raises(DistError, match=f"only lib-1.0-cp38-abi3-manylinux_2_31_x86_64.whl: "
                       f"put one in {cache} to read it"):
        open_dist("lib==1.0")
    cache.mkdir()
    platform.rename(cache / platform.name)
    assert _findings(tree, "lib==1.0") == EXPECTED


def test_a_hash_mismatch_is_refused_and_nothing_is_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "served").mkdir()
    url = _simple_index(tmp_path / "index", _sdist(tmp_path / "served"), digest="0" * 64)
    monkeypatch.setenv("VAM_SDIST_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DistError, match="sha256 mismatch"):
        open_dist("lib==1.0", index_url=url)
    assert not list((tmp_path / "cache").iterdir())


def test_deprecated_name_names_its_new_home(tree: Tree, tmp_path: Path) -> None:
    _write(tmp_path / "lib-src", LIB)
    tree({"plugin/__init__.py": "", "plugin/mod.py": PLUGIN})
    found = verify_against(load_dist(str(tmp_path / "lib-src")), ["plugin"]).findings
    by_line = {f.line: f for f in found}
    assert by_line[3].suggestion == "lib.utils.net.get_port"
    assert "import it from 'lib.utils.net'" in by_line[3].message
    assert by_line[7].suggestion == "lib.input_processor.InputProcessor"
    # A closed __getattr__ serves nothing else: cdiv is missing, and where it lives is said.
    assert by_line[4].suggestion == "lib.utils.math_utils.cdiv"
    assert by_line[17].message.startswith("string 'lib.utils.math_utils.nothere': ")


def test_dist_problems_answers_for_one_path(tmp_path: Path) -> None:
    _write(tmp_path / "lib-src", LIB)
    dist = load_dist(str(tmp_path / "lib-src"))
    assert dist.packages == frozenset({"lib"})  # an sdist's tests/ is never the dist's
    assert dist.problems("lib.utils.math_utils.cdiv") == []
    assert [f.code for f in dist.problems("lib.utils.get_port")] == ["VAI104"]
    assert [f.code for f in dist.problems("lib.utils.cdiv")] == ["VAI001"]
    # As mock.patch resolves it: import `lib`, then look `nothing` up in it.
    missing = dist.problems("lib.nothing.deeper")
    assert [f.code for f in missing] == ["VAI001"]
    assert "cannot import name 'nothing' from 'lib'" in missing[0].message


def test_cli_exit_status_and_formats(tree: Tree, tmp_path: Path) -> None:
    _write(tmp_path / "lib-src", LIB)
    tree({"plugin/__init__.py": "", "plugin/mod.py": PLUGIN, "clean/__init__.py":
          "from lib.utils.net import get_port\n"})
    runner = CliRunner()
    dist = str(tmp_path / "lib-src")
    failed = runner.invoke(main, ["verify-imports", "--against", dist, "plugin"])
    assert failed.exit_code == 1
    assert "plugin/mod.py:3:23: VAI104 'get_port' from 'lib.utils' is deprecated" in failed.output
    clean = runner.invoke(main, ["verify-imports", "--against", dist, "clean"])
    assert clean.exit_code == 0, clean.output
    as_json = runner.invoke(main, ["verify-imports", "--against", dist, "--format", "json",
                                   "plugin"])
    rows = json.loads(as_json.stdout)
    assert [(r["line"], r["code"]) for r in rows] == [(e[1], e[3]) for e in EXPECTED]
    sarif = runner.invoke(main, ["verify-imports", "--against", dist, "--format", "sarif",
                                 "plugin"])
    rules = json.loads(sarif.stdout)["runs"][0]["tool"]["driver"]["rules"]
    assert "VAI104" in [r["id"] for r in rules]
    both = runner.invoke(main, ["verify-imports", "--against", dist, "--dynamic", "plugin"])
    assert both.exit_code == 2


def test_first_party_forwarders_are_read_too(tree: Tree) -> None:
    from tests.verify_imports.vi_helpers import codes, static

    tree({f"pkg/{rel[4:]}": text for rel, text in LIB.items() if rel.startswith("lib/")})
    tree({"pkg/user.py": "from pkg.utils import get_port\nfrom pkg.utils import cdiv\n"})
    assert codes(static("pkg/user.py")) == [
        ("pkg/user.py", 1, 23, "VAI104"),
        ("pkg/user.py", 2, 23, "VAI001"),
    ]


def test_dist_from_source_registers_namespace_folders() -> None:
    from migrator.core.sources import Source

    source = Source("x==1", {"x/__init__.py": b"", "x/ns/deep/mod.py": b"A = 1\n"}, "1")
    dist = dist_from_source(source)
    kinds = {name: mod.kind for name, mod in dist.project.modules.items()}
    assert kinds == {"x": "source", "x.ns": "namespace", "x.ns.deep": "namespace",
                     "x.ns.deep.mod": "source"}
    assert dist.project.modules["x.ns"].path == Path("x==1/x/ns")
    assert dist.problems("x.ns.deep.mod.A") == []


@pytest.mark.parametrize(("make", "message"), [
    ("empty", "ships no Python package"),
    ("bare", "ships no Python package; a git repository needs a revision: "),
])
def test_a_dist_that_ships_no_package_is_a_usage_error(
        tree: Tree, tmp_path: Path, make: str, message: str) -> None:
    """An empty folder, or a bare git clone given without @REV, used to pass: nothing in
    the project imported from a release that held nothing."""
    import subprocess

    tree({"plugin/__init__.py": "from lib.utils import get_port\n"})
    dist = tmp_path / make
    if make == "bare":
        subprocess.run(["git", "init", "-q", "--bare", str(dist)], check=True)
    else:
        dist.mkdir()
    result = CliRunner().invoke(main, ["verify-imports", "--against", str(dist), "plugin"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"vam: error: {dist} {message}"), result.stderr
    if make == "bare":
        assert result.stderr.rstrip().endswith(f"{dist}@REV")
    assert len(result.stderr.splitlines()) == 1
