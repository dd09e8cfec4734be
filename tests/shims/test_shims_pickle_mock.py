"""Pickles (S6) and mock.patch (S7) through old paths, over every old path of the bundled
vllm_ascend table, against a package generated from it (shims_helpers.write_new_layout)."""

from __future__ import annotations

import json
import pickle
import pickletools
from pathlib import Path

import pytest
from shims_helpers import OldPath, Tree, bundled_014, old_paths, write_old_layout

import rules

PACK = bundled_014()
MODULE_PATHS = [p for p in old_paths(PACK) if p.kind == "module"]
SYMBOL_PATHS = [p for p in old_paths(PACK) if p.kind == "symbol"]


def _strings(data: bytes) -> set[str]:
    return {arg for _, arg, _ in pickletools.genops(data) if isinstance(arg, str)}


@pytest.fixture(scope="module")
def old_pickles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Pickles made by code running the 0.13 layout (no shims): for every old module an
    instance of its class, the class and a function; for every moved helper the function."""
    root = tmp_path_factory.mktemp("va_old")
    write_old_layout(root, PACK)
    out = root / "pickles.bin"
    paths = [(p.old, p.kind) for p in old_paths(PACK)]
    Tree(root).run(
        f"""
        import importlib, pickle
        made = {{}}
        for old, kind in {paths!r}:
            if kind == "module":
                mod = importlib.import_module(old)
                for proto in (0, 2, pickle.HIGHEST_PROTOCOL):
                    made[f"{{old}}:instance:{{proto}}"] = pickle.dumps(mod.Thing(7), proto)
                made[f"{{old}}:class"] = pickle.dumps(mod.Thing)
                made[f"{{old}}:function"] = pickle.dumps(mod.func)
            else:
                module, _, name = old.rpartition(".")
                function = getattr(importlib.import_module(module), name)
                made[f"{{old}}:function"] = pickle.dumps(function)
        with open({str(out)!r}, "wb") as f:
            pickle.dump(made, f)
        """
    )
    made: dict[str, bytes] = pickle.loads(out.read_bytes())
    # The pickles really name the old modules: that is what is being tested.
    for old, kind in paths:
        module = old if kind == "module" else old.rpartition(".")[0]
        assert module in _strings(made[f"{old}:function"]), old
    return made


@pytest.mark.parametrize("path", MODULE_PATHS, ids=[p.old for p in MODULE_PATHS])
def test_old_pickles_load_and_new_pickles_record_the_new_name(
    va_layout: tuple[Tree, rules.Pack], old_pickles: dict[str, bytes], path: OldPath, tmp_path: Path
) -> None:
    tree, _ = va_layout
    blobs = {k: v for k, v in old_pickles.items() if k.startswith(f"{path.old}:")}
    data = tmp_path / "in.bin"
    data.write_bytes(pickle.dumps(blobs))
    proc = tree.run(
        f"""
        import importlib, json, pickle
        blobs = pickle.loads(open({str(data)!r}, "rb").read())
        new = importlib.import_module({path.new!r})
        out = []
        for key, blob in sorted(blobs.items()):
            obj = pickle.loads(blob)
            if key.endswith(":class"):
                assert obj is new.Thing, (key, obj)
            elif key.endswith(":function"):
                assert obj is new.func, (key, obj)
            else:
                assert type(obj) is new.Thing and obj.value == 7, (key, obj)
                assert isinstance(obj, new.Thing)
            out.append(pickle.dumps(obj).hex())
        print(json.dumps(out))
        """,
        env={"VLLM_ASCEND_SHIMS": "ignore"},
    )
    for blob in json.loads(proc.stdout):
        names = _strings(bytes.fromhex(blob))
        assert path.new in names, names
        assert path.old not in names, names


def test_old_pickles_of_moved_helpers_load(
    va_layout: tuple[Tree, rules.Pack], old_pickles: dict[str, bytes], tmp_path: Path
) -> None:
    tree, _ = va_layout
    data = tmp_path / "in.bin"
    data.write_bytes(pickle.dumps({p.old: old_pickles[f"{p.old}:function"] for p in SYMBOL_PATHS}))
    moved = {p.old: p.new for p in SYMBOL_PATHS}
    tree.run(
        f"""
        import importlib, pickle
        blobs = pickle.loads(open({str(data)!r}, "rb").read())
        for old, new in {moved!r}.items():
            module, _, name = new.rpartition(".")
            target = getattr(importlib.import_module(module), name)
            assert pickle.loads(blobs[old]) is target, old
            assert pickle.dumps(target) == pickle.dumps(pickle.loads(blobs[old]))
            assert module.encode() in pickle.dumps(target)
        """,
        env={"VLLM_ASCEND_SHIMS": "ignore"},
    )


@pytest.mark.parametrize("path", MODULE_PATHS, ids=[p.old for p in MODULE_PATHS])
def test_mock_patch_through_the_old_path(va_layout: tuple[Tree, rules.Pack], path: OldPath) -> None:
    tree, _ = va_layout
    old, new = path.old, path.new
    tree.run(
        f"""
        import importlib
        from unittest import mock
        # Code that imported the new module (and a function of it) before the patch.
        new = importlib.import_module({new!r})
        from {new} import call_func, func as bound_early
        with mock.patch({old + ".func"!r}, return_value="patched") as patched:
            assert new.call_func() == "patched"
            assert call_func() == "patched"
            assert new.func is patched
        assert new.call_func() == {new!r} and new.func is bound_early

        @mock.patch({old + ".NAME"!r}, "renamed")
        def decorated():
            return new.call_func()

        assert decorated() == "renamed" and new.call_func() == {new!r}
        with mock.patch.object(importlib.import_module({old!r}), "func", lambda: "object"):
            assert new.call_func() == "object"
        """,
        env={"VLLM_ASCEND_SHIMS": "ignore"},
    )
