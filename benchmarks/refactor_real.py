"""Real-input acceptance of `vam refactor` (not run in CI): a step carried out on a copy of the
release before it, compared with the release after it.

    python benchmarks/refactor_real.py                       # step 0.14.0: 0.13.0 -> 0.14.0rc1
    python benchmarks/refactor_real.py --step 0.28.0rc1 --old 0.27.1rc1 --new 0.28.0rc1

Prints: run time; the module sets below every moved module's new path (ours vs the release);
verify-imports errors after the step (and those the step caused); compileall; the old paths
imported through the shims in a fresh interpreter (torch_npu-only imports stubbed); and how
many of the references the release changed we changed the same way, with each disagreement.
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from sdists import sdist  # noqa: E402

from migrator.refactor import carry_out  # noqa: E402
from migrator.refactor.layout import dotted_of, package_of_file  # noqa: E402
from migrator.verify_imports import verify_static  # noqa: E402
from rules import load_pack  # noqa: E402

# Modules only an Ascend host has: stubbed in the shim probe, as dynamic verify-imports skips
# them. A stub module answers any attribute with a placeholder class.
STUBBED = ("torch_npu", "mooncake", "memcache_hybrid", "ucm", "acl", "llm_datadist", "yr",
           "lmcache", "lmcache_ascend", "datasystem", "vllm_ascend.vllm_ascend_C",
           "vllm_ascend._build_info")

_PROBE = r"""
import importlib, importlib.abc, importlib.machinery, json, sys, types, warnings
warnings.simplefilter("ignore")
STUBBED, rows = json.loads(sys.argv[1]), json.loads(sys.argv[2])
class _Stub(types.ModuleType):
    __path__ = []
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {"__init__": lambda self, *a, **k: None})
class _Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if any(name == s or name.startswith(s + ".") for s in STUBBED):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec):
        return _Stub(spec.name)
    def exec_module(self, module):
        pass
sys.meta_path.append(_Stubs())
import torch
if not hasattr(torch, "npu"):
    torch.npu = _Stub("torch.npu")
out = {}
for kind, old, new in rows:
    try:
        importlib.import_module(new if kind == "module" else new.rpartition(".")[0])
    except BaseException as exc:
        out[old] = f"the new path fails as well here: {type(exc).__name__}: {exc}".splitlines()[0]
        continue
    try:
        if kind == "module":
            ok = importlib.import_module(old) is importlib.import_module(new)
        else:
            om, _, on = old.rpartition("."); nm, _, nn = new.rpartition(".")
            a = getattr(importlib.import_module(om), on)
            ok = a is getattr(importlib.import_module(nm), nn)
        out[old] = "ok" if ok else "different object"
    except BaseException as exc:
        out[old] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
print(json.dumps(out))
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--step", default="0.14.0")
    parser.add_argument("--old", default="0.13.0")
    parser.add_argument("--new", default="0.14.0rc1")
    args = parser.parse_args()
    pack = load_pack("vllm_ascend")
    old_tree, new_tree = sdist(args.old), sdist(args.new)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tree"
        shutil.copytree(old_tree, root, symlinks=True)
        started = time.perf_counter()
        outcome = carry_out(root, pack, args.step)
        seconds = time.perf_counter() - started
        plan = outcome.plan
        assert plan is not None
        print(f"step {args.step} on {args.old}: {len(plan.moves)} files moved, "
              f"{len(outcome.changes)} written, {seconds:.2f} s")
        print(f"engine findings needing a human: {len(outcome.findings)}")
        for finding in outcome.findings:
            print(f"  {finding.path}:{finding.line}: {finding.code} {finding.message}")
        _modules(root, new_tree, plan)
        after = verify_static([str(root / "vllm_ascend")]).findings
        errors = [f for f in after if f.is_error]
        print(f"verify-imports after: {len(errors)} errors ({len(outcome.broken)} caused by the "
              f"step, {len(outcome.preexisting)} findings already in {args.old})")
        for finding in outcome.broken:
            print(f"  {finding.path}:{finding.line}: {finding.code} {finding.message}")
        compiled = subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(root / "vllm_ascend")],
            capture_output=True, text=True, check=False,
        )
        print(f"compileall: {'passes' if compiled.returncode == 0 else compiled.stdout[-2000:]}")
        _shims(root, plan)
        _agreement(old_tree, root, new_tree, plan)
    return 0


def _modules(root: Path, reference: Path, plan) -> None:  # type: ignore[no-untyped-def]
    """Modules below each moved module's new path, and its new parents, ours vs release."""
    news = {new for _, new in plan.modules} | {g.new_module for g in plan.symbols}
    parents = {n.rsplit(".", i)[0] for n in news for i in range(1, n.count(".") - 1)}

    def modules(tree: Path) -> set[str]:
        found = {dotted_of(tree, p) for p in (tree / "vllm_ascend").rglob("*.py")}
        return {m for m in found
                if m in parents or any(m == n or m.startswith(n + ".") for n in news)}

    ours, theirs = modules(root), modules(reference)
    print(f"module sets (moved modules and their new parents): ours {len(ours)}, release "
          f"{len(theirs)}, in both {len(ours & theirs)}")
    for name in sorted(ours - theirs):
        print(f"  only ours: {name}")
    for name in sorted(theirs - ours):
        print(f"  only in the release: {name}")


def _shims(root: Path, plan) -> None:  # type: ignore[no-untyped-def]
    rows = [("module", old, new) for old, new in plan.modules
            if not any(m.old == old and m.intermediate for m in plan.step.modules)]
    rows += [("symbol", f"{g.old_module}.{o}", f"{g.new_module}.{n}")
             for g in plan.symbols for o, n in g.renames.items()]
    env_path = f"{root}:{REPO}"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(STUBBED), json.dumps(rows)],
        capture_output=True, text=True, cwd=root, check=False,
        # VLLM_PLUGINS: vLLM would load this repository's own vllm_ascend entry points, which
        # now name the tree under test.
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin", "HOME": str(Path.home()),
             "VLLM_PLUGINS": "none"},
    )
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        print(f"shim probe failed: {done.stderr[-2000:]}")
        return
    ok = sum(v == "ok" for v in result.values())
    env = sum(v.startswith("the new path fails") for v in result.values())
    print(f"old paths through the shims: {ok}/{len(result)} are the new object; {env} not "
          "testable here (the new path itself does not import on vLLM's CPU build)")
    for old, verdict in result.items():
        if verdict != "ok":
            print(f"  {old}: {verdict}")


def _refs(path: Path, package: str) -> Counter[str]:
    """References in one file: imported modules and `module.name`s (relative ones resolved),
    `import` names, and dotted `vllm_ascend.` strings."""
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError):
        return Counter()
    out: Counter[str] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            parts = package.split(".") if package else []
            base = parts[: len(parts) - (node.level - 1)] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            out.update(f"{module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.startswith("vllm_ascend.") and node.value.replace(".", "").replace(
                    "_", "").isalnum():
                out[node.value] += 1
    return Counter({k: v for k, v in out.items() if k.startswith("vllm_ascend.")})


def _agreement(old_tree: Path, ours: Path, reference: Path, plan) -> None:  # type: ignore[no-untyped-def]
    """Of the references the release changed (in the old file, gone from the release's file,
    and touched by the step), how many we changed to what the release has."""
    moves = {m.src: m.dst for m in plan.moves}
    changed = agreed = 0
    disagreements: list[str] = []
    for old_file in sorted(old_tree.rglob("*.py")):
        rel = old_file.relative_to(old_tree)
        final = moves.get(rel, rel)
        ref_file, our_file = reference / final, ours / final
        if not ref_file.is_file() or not our_file.is_file():
            continue
        before = _refs(old_file, package_of_file(old_tree, old_file))
        after = _refs(our_file, package_of_file(ours, our_file))
        theirs = _refs(ref_file, package_of_file(reference, ref_file))
        for ref in before:
            if ref in theirs:
                if ref not in after:
                    disagreements.append(f"{final}: we changed {ref}, the release kept it")
                continue
            ours_now = [r for r in after if r not in before]
            touched = ref not in after
            if not touched:
                continue  # the step does not move it; the release changed it for another reason
            changed += 1
            # Agreement: what we wrote instead is what the release has, or, where the code
            # left the file with a moved definition, neither file has a replacement.
            gained = set(theirs) - set(before)
            if all(r in gained for r in ours_now):
                agreed += 1
            else:
                disagreements.append(f"{final}: {ref} -> ours {sorted(ours_now)}, release "
                                     f"{sorted(set(theirs) - set(before))}")
    share = 100.0 * agreed / changed if changed else 100.0
    print(f"references the step changed that the release also changed: {agreed}/{changed} "
          f"agree ({share:.1f}%)")
    for line in disagreements:
        print(f"  {line}")


if __name__ == "__main__":
    sys.exit(main())
