"""`vam migrate --rules vllm --drop-compat 0.11.0` on vllm-ascend as it was just before its
"Drop 0.11.0 support" commit (a1f142b7ad, #4377), and the figures for BENCHMARKS.md.

    .venv/bin/python benchmarks/drop_compat.py TREE [WORKDIR]

TREE is that revision of vllm-ascend (e.g. `git archive a1f142b7ad^ | tar x -C TREE`; no
released sdist holds the blocks: 0.11.0 has 2, 0.12.0rc1 none). The tree is copied into
WORKDIR (a temporary folder by default), so TREE is never changed. Prints: the
`vllm_version_is("0.11.0")` calls before and after, the files changed, the VAM007 findings,
the files that no longer parse (must be 0) and the time of the run.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GUARD = re.compile(r"vllm_version_is\(\s*[\"']0\.11\.0[\"']\s*\)")


def count_guards(tree: Path) -> tuple[int, int]:
    """(calls, files) of `vllm_version_is("0.11.0")` in the Python files below `tree`."""
    calls = files = 0
    for path in tree.rglob("*.py"):
        found = len(GUARD.findall(path.read_text(encoding="utf-8", errors="replace")))
        calls += found
        files += found > 0
    return calls, files


def unparsable(tree: Path) -> list[Path]:
    bad = []
    for path in tree.rglob("*.py"):
        try:
            ast.parse(path.read_bytes())
        except SyntaxError:
            bad.append(path)
    return bad


def main(source: Path, workdir: Path) -> None:
    tree = workdir / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(source, tree)
    before = count_guards(tree)
    broken_before = unparsable(tree)
    command = [sys.executable, "-m", "migrator", "migrate", "--rules", "vllm",
               "--from", "0.11.0", "--drop-compat", "0.11.0", str(tree)]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    after = count_guards(tree)
    collapsed = done.stderr.count("VAM007")
    print(f"vllm_version_is(\"0.11.0\") before: {before[0]} calls in {before[1]} files")
    print(f"vllm_version_is(\"0.11.0\") after:  {after[0]} calls in {after[1]} files")
    print(f"blocks collapsed (VAM007): {collapsed}")
    print(f"needs a human (VAM002): {done.stderr.count('VAM002')}")
    print(f"files that do not parse: before {len(broken_before)}, after {len(unparsable(tree))}")
    print(f"vam exit {done.returncode}, {seconds:.1f} s")
    print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "")
    for path in unparsable(tree):
        print(f"  does not parse: {path.relative_to(tree)}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    work = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="vam-drop-"))
    main(Path(sys.argv[1]), work)
