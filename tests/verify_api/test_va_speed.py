"""What makes a cold run cheaper must not change what it reads: the walks that replace
`ast.walk` keep its order, a file with a walrus still has every binding read, an sdist read in
one pass holds what a sorted read held, a copy of a release answers for its own packages, and
the garbage collector is paused for the run only."""

from __future__ import annotations

import ast
import dataclasses
import gc
import io
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from migrator.core.config import Config
from migrator.core.dists import resolve
from migrator.core.sources import open_release
from migrator.verify_api import ApiRequest, nodes, run, verify_api
from migrator.verify_api.project import read_file
from migrator.verify_api.upstream import Upstream
from rules import load_pack
from tests.verify_api.conftest import Tree, write
from tests.verify_api.releases import OLD, PLUGIN

SAMPLE = textwrap.dedent("""
    import os
    from . import sibling as sib

    @decorate(arg=1)
    class A(Base, metaclass=Meta):
        x: int = 1

        def method(self, a: int = f(1), *args, **kw) -> None:
            self.y = [i.z for i in a if (n := i.w)]
            try:
                g(lambda q: q.attr)
            except (KeyError, ValueError) as exc:
                raise Other() from exc
            else:
                h()
            finally:
                self.z: list[int] = []
            match a:
                case {"k": v} if v.ok:
                    self.v = v
                case [first, *rest]:
                    pass
                case _:
                    return

    async def coro():
        async with ctx() as c, other():
            async for item in c.items():
                await item.run()
        while (value := next(it, None)) is not None:
            del value.attr
        else:
            global G
    """)


def _trees() -> list[ast.AST]:
    own = Path(nodes.__file__).parent
    return [ast.parse(SAMPLE)] + [ast.parse(p.read_bytes()) for p in sorted(own.glob("*.py"))]


def test_walk_yields_what_ast_walk_yields_in_its_order_but_expression_contexts() -> None:
    for tree in _trees():
        expected = [n for n in ast.walk(tree) if not isinstance(n, ast.expr_context)]
        assert nodes.walk(tree) == expected
    function = ast.parse(SAMPLE).body[2].body[0]
    assert nodes.walk(function)[0] is function


def test_statements_are_the_statements_ast_walk_yields_in_its_order() -> None:
    kinds = (ast.stmt, ast.excepthandler, ast.match_case)
    for tree in _trees():
        assert nodes.statements(tree) == [tree] + [n for n in ast.walk(tree)
                                                    if isinstance(n, kinds)]
    method = ast.parse(SAMPLE).body[2].body[1]
    assert nodes.statements(method) == [n for n in ast.walk(method) if isinstance(n, kinds)]


def test_a_walrus_in_an_expression_still_rebinds_a_typed_name() -> None:
    source = textwrap.dedent("""
        from vllm.config import ModelConfig, VllmConfig

        def one(config: ModelConfig):
            return [config.kept for _ in range(1)]

        def two(config: ModelConfig):
            if (config := VllmConfig()):
                return config.dropped
        """).encode()
    facts = read_file(source, "p.py", "p", False, frozenset({"vllm"}))
    assert facts is not None
    chains = [u.chain for u in facts.uses if u.chain]
    assert chains == [("kept",)]  # `two`'s config is two types: nothing is known of it


def _sdist(path: Path, members: list[tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_an_sdist_read_in_one_pass_keeps_sorted_paths_and_the_last_copy(tmp_path: Path) -> None:
    archive = _sdist(tmp_path / "pkg-1.0.tar.gz", [
        ("pkg-1.0/pkg/z.py", b"Z = 1\n"),
        ("pkg-1.0/PKG-INFO", b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n"),
        ("pkg-1.0/pkg/__init__.py", b""),
        ("pkg-1.0/pkg/a.py", b"A = 1\n"),
        ("pkg-1.0/pkg/a.py", b"A = 2\n"),
        ("pkg-1.0/pkg/data.txt", b"not python\n"),
        ("pkg-1.0/setup.py", b"setup()\n"),
    ])
    source = open_release(archive)
    assert source.files == {"pkg/__init__.py": b"", "pkg/a.py": b"A = 2\n",
                            "pkg/z.py": b"Z = 1\n"}
    assert list(source.files) == sorted(source.files)
    assert source.version == "1.0"


def test_a_copy_of_a_release_answers_for_its_own_packages(tmp_path: Path) -> None:
    write(tmp_path / "old", OLD)
    release = Upstream.load(resolve(str(tmp_path / "old")), frozenset({"vllm"}), cache=False)
    assert release.lookup("vllm.layers.CustomOp") is not None
    assert release.mro("vllm.layers.CustomOp")[0]
    other = dataclasses.replace(release, packages=frozenset({"torch"}))
    assert other.lookup("vllm.layers.CustomOp") is None
    assert other.mro("vllm.layers.CustomOp") == ([], False)
    assert release.lookup("vllm.layers.CustomOp") is not None
    classes, _ = release.mro("vllm.layers.CustomOp")
    classes.clear()  # what a caller does with its list is not kept
    assert release.mro("vllm.layers.CustomOp")[0]


def test_the_collector_is_paused_while_the_project_is_read_and_resumed(
        tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tree({**{f"old/{k}": v for k, v in OLD.items()},
                 **{f"plugin/{k}": v for k, v in PLUGIN.items()}})
    seen: list[bool] = []
    read = run.collect

    def collect(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return read(*args, **kwargs)

    monkeypatch.setattr(run, "collect", collect)
    assert gc.isenabled()
    verify_api(ApiRequest(("plugin",), str(root / "old"), load_pack("vllm"), Config(),
                          upstream=("vllm",)))
    assert seen == [False]
    assert gc.isenabled()
