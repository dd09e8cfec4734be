"""The bundled vllm_ascend table: it installs, costs nothing until used, every old path works
in both import orders (S9), and the project's own code never uses an old path (S8).

Tests marked "real subsystem" run on the repository's `vllm_ascend`; a module that does not
exist there yet, or whose optional third-party dependency (torch_npu, mooncake, vllm...) is
missing here, is skipped with the reason.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest
from shims_helpers import REPO, OldPath, Tree, bundled_014, clean_env, old_paths

import rules

PACK = bundled_014()
PATHS = old_paths(PACK)
SHIMS_DIR = REPO / "shims"


def _all_olds() -> list[str]:
    return [p.old for p in PATHS]


def test_bundled_pack_installs(tree: Tree) -> None:
    proc = tree.run(
        """
        import json, sys, shims
        finder = shims.install("vllm_ascend")
        assert shims.install("vllm_ascend") is finder and sys.meta_path[0] is finder
        print(json.dumps({
            "env": finder.env_var,
            "resolve": {name: finder.resolve(name) for name in %r},
            "hosts": {k: sorted(v) for k, v in finder.hosts.items()},
        }))
        """
        % (
            [p.old for p in PATHS if p.kind == "module"]
            + [
                "vllm_ascend.distributed.kvpool_extra",
                "vllm_ascend.distributed.utils",
                "vllm_ascend.distributed.parallel_state",
                "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store",
            ]
        )
    )
    got = json.loads(proc.stdout)
    assert got["env"] == "VLLM_ASCEND_SHIMS"
    for path in PATHS:
        if path.kind == "module":
            assert got["resolve"][path.old] == path.new
    for stays in ("kvpool_extra", "utils", "parallel_state", "kv_transfer.kv_pool.ascend_store"):
        assert got["resolve"][f"vllm_ascend.distributed.{stays}"] is None
    assert got["hosts"] == {
        "vllm_ascend.distributed": ["register_connector"],
        "vllm_ascend.distributed.utils": sorted(
            p.old.rpartition(".")[2]
            for p in PATHS
            if p.old.startswith("vllm_ascend.distributed.utils.")
        ),
    }


def test_importing_the_real_package_imports_no_old_path(tree: Tree) -> None:
    """`import vllm_ascend.distributed` (the real one) installs the shims and imports no
    old path, nothing heavy and none of the codemod's dependencies (checked both ways:
    sys.modules, and `python -X importtime`)."""
    olds = _all_olds()
    proc = tree.run(
        """
        import json, sys
        import vllm_ascend, vllm_ascend.distributed, shims
        assert [f.pack.name for f in shims.installed()] == ["vllm_ascend"]
        print(json.dumps(sorted(sys.modules)))
        """,
        flags=("-X", "importtime"),
    )
    loaded = set(json.loads(proc.stdout))
    timed = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "vllm_ascend.distributed" in timed
    for names in (loaded, timed):
        assert not names & set(olds)
        assert not {n for n in names if any(n.startswith(o + ".") for o in olds)}
        assert not names & {"torch", "vllm", "torch_npu", "migrator", "libcst", "click"}


def test_shims_import_only_stdlib_and_rules() -> None:
    """Static: every import statement in shims/ (functions included) names the stdlib,
    `rules` or shims itself."""
    allowed = set(sys.stdlib_module_names) | {"rules", "__future__"}
    for path in sorted(SHIMS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name}: imports {name}"


def test_using_old_paths_pulls_in_no_codemod_dependency(acme: Tree) -> None:
    proc = acme.run(
        """
        import json, sys
        before = set(sys.modules)
        import acme.flat, acme.oldpkg.deep.leaf
        from acme.utils import moved
        import importlib; importlib.reload(acme.utils)
        print(json.dumps(sorted(set(sys.modules) - before)))
        """,
        env={"ACME_SHIMS": "ignore"},
    )
    added = {name.split(".")[0] for name in json.loads(proc.stdout)}
    allowed = set(sys.stdlib_module_names) | {"acme", "shims", "rules"}
    if sys.version_info < (3, 11):
        allowed.add("tomli")  # rules' TOML parser before tomllib
    assert added <= allowed, added - allowed


# -- S9: every old path x both orders, on the generated layout and on the real subsystem ------

ORDER_SCRIPT = """
import importlib, json, sys
def old():
    if {kind!r} == "module":
        return importlib.import_module({old!r})
    module, _, name = {old!r}.rpartition(".")
    return getattr(importlib.import_module(module), name)
def new():
    if {kind!r} == "module":
        return importlib.import_module({new!r})
    module, _, name = {new!r}.rpartition(".")
    return getattr(importlib.import_module(module), name)
try:
    if {old_first!r}:
        first = old()
        second = new()
    else:
        second = new()
        first = old()
except ModuleNotFoundError as exc:
    top = (exc.name or "").split(".")[0]
    if top not in ("vllm_ascend", "shims", "rules"):
        print(json.dumps({{"skip": exc.name}}))
        raise SystemExit(0)
    raise
assert first is second, (first, second)
if {kind!r} == "module":
    assert sys.modules[{old!r}] is sys.modules[{new!r}]
half = [n for n, m in list(sys.modules.items())
        if getattr(getattr(m, "__spec__", None), "_initializing", False)]
assert not half, "partially initialised: " + ", ".join(half)
print(json.dumps({{"ok": True}}))
"""


def _run_order(tree: Tree, path: OldPath, old_first: bool) -> dict[str, object]:
    script = ORDER_SCRIPT.format(kind=path.kind, old=path.old, new=path.new, old_first=old_first)
    proc = tree.run(script, env={"VLLM_ASCEND_SHIMS": "ignore"})
    result: dict[str, object] = json.loads(proc.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize("old_first", [True, False], ids=["old-first", "new-first"])
@pytest.mark.parametrize("path", PATHS, ids=[p.old for p in PATHS])
def test_every_old_path_both_orders_generated(
    va_layout: tuple[Tree, rules.Pack], path: OldPath, old_first: bool
) -> None:
    tree, _ = va_layout
    assert _run_order(tree, path, old_first) == {"ok": True}


def _real_file(module: str) -> bool:
    base = REPO.joinpath("subsystem", *module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _now(name: str) -> str:
    """Where module `name` lives in the new layout (longest old prefix of the table)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        for move in PACK.steps[0].modules:
            if move.old == ".".join(parts[:i]):
                return ".".join([move.new, *parts[i:]])
    return name


def _missing_in_repo(path: OldPath) -> list[str]:
    """First-party modules the probe needs that the real subsystem does not have yet: the
    new module, and the packages the old path's parents stand for."""
    parts = path.old.split(".")
    parents = [_now(".".join(parts[:i])) for i in range(2, len(parts))]
    new = path.new if path.kind == "module" else path.new.rpartition(".")[0]
    return [m for m in (*parents, new) if not _real_file(m)]


@pytest.mark.parametrize("old_first", [True, False], ids=["old-first", "new-first"])
@pytest.mark.parametrize("path", PATHS, ids=[p.old for p in PATHS])
def test_every_old_path_both_orders_real_subsystem(
    tmp_path: Path, path: OldPath, old_first: bool
) -> None:
    missing = _missing_in_repo(path)
    if missing:
        pytest.skip(f"not in the real subsystem yet: {', '.join(missing)}")
    result = _run_order(Tree(tmp_path), path, old_first)
    if "skip" in result:
        pytest.skip(f"missing optional dependency {result['skip']}")
    assert result == {"ok": True}


# -- S8: the project's own code never imports an old path --------------------------------------

S8_SCRIPT = """
import importlib, json, sys, traceback, warnings
import shims
warnings.filterwarnings("error", category=shims.MovedNameWarning)
report = {}
for name in %r:
    try:
        importlib.import_module(name)
        report[name] = "ok"
    except shims.MovedNameWarning:
        report[name] = "old path: " + traceback.format_exc(limit=-8)
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        report[name] = "skip: " + str(exc.name) if top != "vllm_ascend" else "error: " + repr(exc)
    except Exception as exc:
        report[name] = "error: " + "".join(traceback.format_exception(exc, limit=-4))
olds = %r
aliased = sorted(n for n in sys.modules if n in olds or n.startswith(tuple(o + "." for o in olds)))
print(json.dumps({"report": report, "aliased": aliased}))
"""


def _real_modules() -> list[str]:
    names = []
    for path in sorted((REPO / "subsystem" / "vllm_ascend").rglob("*.py")):
        parts = list(path.relative_to(REPO / "subsystem").with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def test_project_code_never_imports_an_old_path(tmp_path: Path) -> None:
    import subprocess

    modules = _real_modules()
    script = tmp_path / "s8.py"
    script.write_text(S8_SCRIPT % (modules, _all_olds()), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    bad = {k: v for k, v in result["report"].items() if not v.startswith(("ok", "skip"))}
    assert not bad, "\n".join(f"{k}: {v}" for k, v in bad.items())
    assert result["aliased"] == [], result["aliased"]
    if not any(v == "ok" for v in result["report"].values()):
        pytest.skip("no module of the real subsystem imports here (missing dependencies)")
