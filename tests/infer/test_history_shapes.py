"""What vllm-ascend's history needed from infer, each on a small synthetic pair of trees:
rows inside moved modules, packages that moved with renamed classes, renames that keep the
old calls working (and replacements that do not), registrations, flattened modules."""

from __future__ import annotations

from pathlib import Path

from tests.infer.helpers import FUNCTION as HELPER
from tests.infer.helpers import infer, pairs, release, table

ENGINE = """
class {name}:
    def __init__(self, config, use_layerwise):
        self.config = config
        self.use_layerwise = use_layerwise
        self.blocks = {{}}
        self.pending = []

    def store(self, key, value):
        if key in self.blocks:
            self.pending.append((key, value))
        else:
            self.blocks[key] = value
        return len(self.blocks)

    def lookup(self, keys):
        found = 0
        for key in keys:
            if key not in self.blocks:
                break
            found += 1
        return found{extra}
"""


def _removed(data: dict) -> set[str]:
    return {e["old"] for e in data["step"][0].get("removed", [])}


def test_a_rename_inside_a_moved_module_is_a_row(tmp_path: Path) -> None:
    old = release(
        tmp_path / "old",
        {
            "pkg/__init__.py": "",
            "pkg/a/__init__.py": "",
            "pkg/a/conn.py": ENGINE.format(name="Old", extra="") + HELPER.format(name="helper"),
        },
    )
    new = release(
        tmp_path / "new",
        {
            "pkg/__init__.py": "",
            "pkg/a/__init__.py": "",
            "pkg/b.py": ENGINE.format(name="New", extra="") + HELPER.format(name="helper"),
        },
    )
    result = infer(old, new)
    data = table(result)
    assert pairs(data, "module") == {("pkg.a.conn", "pkg.b")}
    assert pairs(data, "symbol") == {("pkg.a.conn.Old", "pkg.b.New")}
    assert "NOT APPLIED" not in result.stdout


def test_a_removal_inside_a_moved_module_is_a_row(tmp_path: Path) -> None:
    old = release(
        tmp_path / "old",
        {
            "pkg/__init__.py": "",
            "pkg/m.py": HELPER.format(name="f")
            + HELPER.format(name="g")
            + "\ndef gone(x):\n    return x\n",
        },
    )
    new = release(
        tmp_path / "new",
        {"pkg/__init__.py": "", "pkg/n.py": HELPER.format(name="f") + HELPER.format(name="g")},
    )
    data = table(infer(old, new))
    assert pairs(data, "module") == {("pkg.m", "pkg.n")}
    assert _removed(data) == {"pkg.m.gone"}


def test_a_module_whose_class_was_renamed_moves_with_it(tmp_path: Path) -> None:
    """Its only class renamed and edited (more than half its body new): paired by the most
    similar body in NEW, since it stands out; not reported removed."""
    extra = "\n\n    def drop(self, key):\n        self.blocks.pop(key, None)\n        return key"
    old = release(
        tmp_path / "old",
        {
            "pkg/__init__.py": "",
            "pkg/store/__init__.py": "",
            "pkg/store/engine.py": ENGINE.format(name="StoreEngine", extra=""),
        },
    )
    new = release(
        tmp_path / "new",
        {
            "pkg/__init__.py": "",
            "pkg/pool/__init__.py": "",
            "pkg/pool/worker.py": ENGINE.format(name="PoolWorker", extra=extra * 3),
        },
    )
    data = table(infer(old, new))
    assert ("pkg.store.engine", "pkg.pool.worker") in pairs(data, "module")
    assert pairs(data, "symbol") == {("pkg.store.engine.StoreEngine", "pkg.pool.worker.PoolWorker")}
    assert "pkg.store.engine" not in _removed(data)


def test_a_replacement_with_other_fields_is_removed_not_renamed(tmp_path: Path) -> None:
    fields = "@dataclass\nclass {name}:\n" + "".join(f"    {f}: int\n" for f in "abcd")
    body = "\n    def key(self):\n        return (self.a, self.b, self.c, self.d, 1, 2, 3)\n"
    old = release(
        tmp_path / "old",
        {
            "pkg/__init__.py": "",
            "pkg/m.py": "from dataclasses import dataclass\n"
            + fields.format(name="EngineKey")
            + body,
        },
    )
    new_fields = "@dataclass\nclass PoolKey:\n    meta: object\n    a: int\n"
    new = release(
        tmp_path / "new",
        {
            "pkg/__init__.py": "",
            "pkg/m.py": "from dataclasses import dataclass\n" + new_fields + body,
        },
    )
    data = table(infer(old, new))
    assert "symbol" not in data["step"][0]
    assert _removed(data) == {"pkg.m.EngineKey"}


def test_a_typo_fixed_is_a_rename_by_its_close_name(tmp_path: Path) -> None:
    old = release(
        tmp_path / "old",
        {
            "pkg/__init__.py": "",
            "pkg/ps.py": "def destory_groups():\n    _A.close()\n    _B.close()\n",
        },
    )
    new = release(
        tmp_path / "new",
        {"pkg/__init__.py": "", "pkg/ps.py": "def destroy_groups():\n    _C.destroy()\n"},
    )
    data = table(infer(old, new))
    assert pairs(data, "symbol") == {("pkg.ps.destory_groups", "pkg.ps.destroy_groups")}


def test_a_package_with_one_renamed_module_collapses(tmp_path: Path) -> None:
    old = release(
        tmp_path / "old",
        {
            "pkg/__init__.py": "",
            "pkg/a/__init__.py": "",
            "pkg/a/x/__init__.py": "",
            "pkg/a/x/one.py": HELPER.format(name="f1"),
            "pkg/a/x/two.py": HELPER.format(name="f2"),
            "pkg/a/x/three.py": HELPER.format(name="f3"),
            "pkg/a/x/x_conn.py": ENGINE.format(name="XConn", extra=""),
        },
    )
    new = release(
        tmp_path / "new",
        {
            "pkg/__init__.py": "",
            "pkg/b/__init__.py": "",
            "pkg/b/y/__init__.py": "",
            "pkg/b/y/one.py": HELPER.format(name="f1"),
            "pkg/b/y/two.py": HELPER.format(name="f2"),
            "pkg/b/y/three.py": HELPER.format(name="f3"),
            "pkg/b/y/y_conn.py": ENGINE.format(name="YConn", extra=""),
        },
    )
    data = table(infer(old, new))
    modules = {m["old"]: m for m in data["step"][0]["module"]}
    assert modules["pkg.a.x"]["new"] == "pkg.b.y"
    assert modules["pkg.a.x"]["submodules"] == ["one", "three", "two"]
    assert modules["pkg.a.x.x_conn"]["new"] == "pkg.b.y.y_conn"
    assert pairs(data, "symbol") == {("pkg.a.x.x_conn.XConn", "pkg.b.y.y_conn.YConn")}


def test_a_registered_module_moves_where_new_registers_it(tmp_path: Path) -> None:
    register = 'Factory.register("StoreV1", "{path}", "{cls}")\n'
    old = release(
        tmp_path / "old",
        {
            "pkg/__init__.py": register.format(path="pkg.store.conn", cls="Conn"),
            "pkg/store/__init__.py": "",
            "pkg/store/conn.py": HELPER.format(name="a")
            + HELPER.format(name="b").replace("1", "2")
            + ENGINE.format(name="Conn", extra=""),
        },
    )
    new = release(
        tmp_path / "new",
        {
            "pkg/__init__.py": register.format(path="pkg.pool.connector", cls="PoolConn"),
            "pkg/pool/__init__.py": "",
            "pkg/pool/sched.py": HELPER.format(name="a")
            + HELPER.format(name="b").replace("1", "2"),
            "pkg/pool/connector.py": ENGINE.format(name="PoolConn", extra=""),
        },
    )
    result = infer(old, new)
    data = table(result)
    assert ("pkg.store.conn", "pkg.pool.connector") in pairs(data, "module")
    assert "registered as StoreV1" in result.stdout


def test_a_module_flattened_into_its_package_name(tmp_path: Path) -> None:
    old = release(
        tmp_path / "old",
        {
            "pkg/__init__.py": "",
            "pkg/store/__init__.py": "",
            "pkg/store/engine.py": "import threading\n\ndef get_engine():\n    return threading\n",
        },
    )
    new = release(
        tmp_path / "new",
        {
            "pkg/__init__.py": "",
            "pkg/store_engine.py": "import threading\n\nclass Engine:\n    pass\n\n"
            "engine = Engine()\n",
        },
    )
    data = table(infer(old, new))
    assert ("pkg.store.engine", "pkg.store_engine") in pairs(data, "module")
    assert _removed(data) >= {"pkg.store.engine.get_engine"}


# -- bound at run time in NEW -------------------------------------------------------------------


def test_a_reexport_under_type_checking_only_is_a_move(tmp_path: Path) -> None:
    old = release(
        tmp_path / "old", {"pkg/__init__.py": "", "pkg/utils.py": HELPER.format(name="f")}
    )
    new = release(
        tmp_path / "new",
        {
            "pkg/__init__.py": "",
            "pkg/utils.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
            "    from pkg.kv import f\n",
            "pkg/kv.py": HELPER.format(name="f"),
        },
    )
    result = infer(old, new)
    assert pairs(table(result), "symbol") == {("pkg.utils.f", "pkg.kv.f")}
    assert "only under `if TYPE_CHECKING:`" in result.stdout


def test_a_name_served_by_a_deprecation_forwarder_is_a_move(tmp_path: Path) -> None:
    forwarder = (
        'import importlib\nimport warnings\n\n_MOVED = {"f": "pkg.kv"}\n\n\n'
        "def __getattr__(name):\n    if name in _MOVED:\n"
        '        warnings.warn(f"{name} moved", DeprecationWarning)\n'
        "        return getattr(importlib.import_module(_MOVED[name]), name)\n"
        "    raise AttributeError(name)\n"
    )
    old = release(
        tmp_path / "old",
        {"pkg/__init__.py": "", "pkg/utils.py": HELPER.format(name="f") + HELPER.format(name="g")},
    )
    new = release(
        tmp_path / "new",
        {
            "pkg/__init__.py": "",
            "pkg/kv.py": HELPER.format(name="f"),
            "pkg/utils.py": forwarder + HELPER.format(name="g"),
        },
    )
    result = infer(old, new)
    assert pairs(table(result), "symbol") == {("pkg.utils.f", "pkg.kv.f")}
    assert "served by a deprecation forwarder" in result.stdout


def test_a_reexport_from_a_third_party_package_is_a_comment(tmp_path: Path) -> None:
    old = release(
        tmp_path / "old",
        {
            "pkg/__init__.py": "",
            "pkg/conn.py": HELPER.format(name="Conn") + HELPER.format(name="g"),
        },
    )
    new = release(
        tmp_path / "new",
        {
            "pkg/__init__.py": "",
            "pkg/conn.py": "from lmcache_x.conn import Conn\n" + HELPER.format(name="g"),
        },
    )
    result = infer(old, new)
    data = table(result)
    assert "symbol" not in data["step"][0] and "removed" not in data["step"][0]
    assert "re-exported from third-party lmcache_x, not resolved" in result.stdout
    assert '# old = "pkg.conn.Conn"' in result.stdout
