"""Upgrade vllm-ascend 0.11.0's code from vLLM 0.11.0 to 0.13.0 with vam, and compare with
what vllm-ascend's developers did by hand (their 0.13.0 sdist).

    .venv/bin/python benchmarks/vllm_upgrade.py [WORKDIR]

1. `vam verify-imports --against vllm==0.13.0` on a copy of the 0.11.0 sdist: what breaks;
2. `vam migrate --rules vllm --from 0.11.0 --to 0.13.0` on that copy (VAM003 = removed);
3. the same check again: what is left;
4. for `vllm.*` references (imports and dotted strings) in files present in both sdists:
   the references the humans changed that vam changed the same way, and vam's rewrites the
   humans did not make, each with the reason read off the human file.
Sdists come from ~/.cache/vam-sdists (migrator.core.dists); nothing lands in the repository.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from benchmarks.vllm_pack import references
from migrator.core.dists import fetch
from migrator.core.sources import Source, open_release
from migrator.verify_imports.against import Dist, load_dist

VLLM_13: Dist
VAM = str(Path(sys.executable).with_name("vam"))
TARGETS = ("vllm_ascend", "tests")


def run(args: list[str], cwd: Path) -> tuple[float, str, str]:
    started = time.perf_counter()
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - started, done.stdout, done.stderr


def count(text: str, code: str) -> int:
    return len(re.findall(rf": {code} ", text))


def per_file(source: Source) -> dict[str, set[str]]:
    return {path: references([Source("", {path: data})], from_modules=False)
            for path, data in source.files.items()}


def compare(old: Source, human: Source, vam: Source) -> None:
    before, after, theirs = per_file(old), per_file(vam), per_file(human)
    changed = reproduced = 0
    extra: list[str] = []
    for path in sorted(set(before) & set(theirs)):
        human_dropped = before[path] - theirs[path]
        vam_dropped = before[path] - after[path]
        vam_added = after[path] - before[path]
        changed += len(human_dropped)
        for ref in sorted(vam_dropped):
            new = next((r for r in vam_added if r.rpartition(".")[2] == ref.rpartition(".")[2]),
                       "")
            if ref in human_dropped and new in theirs[path]:
                reproduced += 1
                continue
            extra.append(f"{path}: {ref} -> {new or '?'}: {reason(ref, new, human, path)}")
    print(f"references the humans changed: {changed}; vam made the same change: {reproduced}")
    print(f"vam rewrites the humans did not make: {len(extra)}")
    for line in extra:
        print("  " + line)


def reason(ref: str, new: str, human: Source, path: str) -> str:
    text = human.files.get(path, b"").decode("utf-8", "replace")
    name = ref.rpartition(".")[2]
    if ref in references([Source("", {path: human.files.get(path, b"")})]):
        if "vllm_version_is" in text:
            return "kept in a vllm_version_is compat block"
        problems = {f.code for f in VLLM_13.problems(ref)}
        if "VAI104" in problems:
            return "human kept a name only a deprecation forwarder still serves"
        return "human kept the old path: it still resolves in vLLM 0.13.0 (a re-export)"
    if name not in text:
        return "code deleted: the human file no longer uses the name"
    return "the human file imports it another way (API change or a different module)"


def main() -> None:
    global VLLM_13
    VLLM_13 = load_dist("vllm==0.13.0")
    work = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="vam-upgrade-"))
    tree = work / "vllm_ascend-0.11.0"
    shutil.rmtree(tree, ignore_errors=True)
    with tarfile.open(fetch("vllm-ascend", "0.11.0")) as tar:
        tar.extractall(work, filter="data")
    check = [VAM, "verify-imports", "--against", "vllm==0.13.0", *TARGETS]
    seconds, out, _ = run(check, tree)
    print(f"before: {count(out, 'VAI001') + count(out, 'VAI002')} errors, "
          f"{count(out, 'VAI104')} deprecated (VAI104) in {seconds:.1f} s")
    migrate = [VAM, "migrate", "--rules", "vllm", "--from", "0.11.0", "--to", "0.13.0", *TARGETS]
    seconds, out, err = run(migrate, tree)
    removed = sorted(set(re.findall(r"VAM003 '([\w.]+)'", out + err)))
    # The summary line, not the per-kind counts printed under it.
    summary = next((line for line in err.splitlines() if line.startswith("vam: ")), "")
    print(f"migrate: {summary} in {seconds:.1f} s; removed (VAM003): {', '.join(removed)}")
    seconds, out, _ = run(check, tree)
    left = re.findall(r"VAI00[12] (?:cannot import name '(\w+)' from '([\w.]+)'|no module named "
                      r"'([\w.]+)')", out)
    names = sorted({f"{m}.{n}" if n else g for n, m, g in left})
    print(f"after: {len(left)} errors ({', '.join(names)}) in {seconds:.1f} s")
    print(f"after, not reported removed by migrate: {sorted(set(names) - set(removed))}")
    compare(open_release(fetch("vllm-ascend", "0.11.0")),
            open_release(fetch("vllm-ascend", "0.13.0")), open_release(tree))


if __name__ == "__main__":
    main()
