"""vam on vllm-ascend's main2main commits: does `vam upgrade vllm==B` make the humans' import
moves, and does verify-api flag the signature breaks they fixed?

    PYTHONPATH=. .venv/bin/python benchmarks/main2main.py [--git-dir DIR] [--since 0.13.0]
        [--only SHA]... [--limit N] [--json OUT] [--list]

DIR is a bare clone of vllm-ascend (default ~/.cache/vam-git/vllm-ascend.git, cloned from
GitHub when absent). The commits are those whose title says they upgrade vLLM (main2main,
upgrade, update, bump) and that move the release vllm-ascend's Dockerfile builds
(`ARG VLLM_TAG=vA` -> `vB`, else `.github/vllm-release-tag.commit`) from A >= --since to a
later B. For each: the parent's tree (git archive into a temporary folder, never the
repository), the human diff read by benchmarks/main2main_diff.py, then `vam upgrade vllm==B
--from A --write --format json` on the tree, and the scores:
- import moves the human made, and the lanes the human dropped (each an A -> B move written
  in dual-lane form before, during the syncs with vLLM main): how many the vllm pack's steps
  in (A, B] know (`pack knows`);
- import moves: reproduced (same file, name, old -> new; `dual` when vam kept the old lane),
  wrong rewrites (a move vam made that the human did not, each with the reason; one whose old
  import fails at B is counted apart, `+N`: a fix the human left undone), missed (each
  with the reason the vllm pack gives, or "not in the pack");
- verify-api (when this vam has it): the hunks where the human followed a signature change,
  flagged (a VAP finding on the parent inside the hunk) or missed, and false alarms (findings
  outside every hunk the human changed).
Prints a Markdown table (for BENCHMARKS.md); --json writes every detail.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import main2main_diff as md
from migrator.core.resolver import Resolver
from rules import load_pack, version_key

DEFAULT_GIT = Path.home() / ".cache" / "vam-git" / "vllm-ascend.git"
URL = "https://github.com/vllm-project/vllm-ascend"
_RELEASE = re.compile(r"^v?(\d+\.\d+\.\d+(?:\.post\d+)?)$")
_TAG = re.compile(r"^(?:#\s*)?ARG VLLM_TAG=(\S+)", re.M)  # commented out: built from a commit
_TITLE = re.compile(r"main2main|upgrade|update|bump", re.I)


def git(gitdir: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={gitdir}", *args], capture_output=True,
                          text=True, check=True, errors="replace").stdout


def show(gitdir: Path, rev: str, path: str) -> str | None:
    done = subprocess.run(["git", f"--git-dir={gitdir}", "show", f"{rev}:{path}"],
                          capture_output=True, check=False)
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


def ensure_clone(gitdir: Path) -> Path:
    if not (gitdir / "HEAD").exists():
        gitdir.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "--bare", "--quiet", URL, str(gitdir)], check=True)
    return gitdir


def vllm_release(gitdir: Path, rev: str) -> str | None:
    """The vLLM release `rev` builds against: Dockerfile's VLLM_TAG, else the CI tag file;
    None when it names a commit, not a release."""
    for path, pattern in (("Dockerfile", _TAG), (".github/vllm-release-tag.commit", None)):
        text = show(gitdir, rev, path)
        if text is None:
            continue
        match = pattern.search(text) if pattern else re.match(r"\s*(\S+)", text)
        if match and (release := _RELEASE.match(match.group(1))):
            return release.group(1)
    return None


def find_commits(gitdir: Path, since: str) -> list[dict[str, str]]:
    """The main2main release commits, oldest first (see the module doc)."""
    log = git(gitdir, "log", "--first-parent", "--format=%H%x1f%s", "-G", "VLLM_TAG=", "HEAD",
              "--", "Dockerfile", ".github/vllm-release-tag.commit")
    found = []
    for line in reversed(log.splitlines()):
        sha, _, title = line.partition("\x1f")
        if not _TITLE.search(title):
            continue
        before, after = vllm_release(gitdir, f"{sha}^"), vllm_release(gitdir, sha)
        if before and after and version_key(since) <= version_key(before) < version_key(after):
            found.append({"sha": sha, "title": title, "before": before, "after": after})
    return found


def human_change(gitdir: Path, sha: str) -> dict[str, Any]:
    """The human diff of `sha` over its parent, read (moves, lanes dropped, line categories,
    signature hunks) per Python file."""
    diff = git(gitdir, "diff", "-U0", "--no-renames", f"{sha}^", sha, "--", "*.py")
    moves: list[md.Move] = []
    dropped: list[md.Move] = []
    counts = dict.fromkeys(md.CATEGORIES, 0)
    sites: dict[str, list[tuple[int, int]]] = {}
    touched: dict[str, list[tuple[int, int]]] = {}
    files = md.hunks(diff)
    for path, file_hunks in files.items():
        before = md.read_side(show(gitdir, f"{sha}^", path) or "")
        after = md.read_side(show(gitdir, sha, path) or "")
        found, lanes = md.moves(path, before, after)
        moves += found
        dropped += lanes
        for key, value in md.classify(file_hunks, before, after, lanes).items():
            counts[key] += value
        sites[path] = md.signature_sites(file_hunks, before, after)
        touched[path] = [(h.old_start, h.old_start + max(h.old_count, 1) - 1)
                         for h in file_hunks]
    return {"files": len(files), "moves": moves, "dropped": dropped, "lines": counts,
            "sites": sites, "touched": touched}


def run_vam(gitdir: Path, sha: str, before: str, after: str) -> dict[str, Any]:
    """`vam upgrade vllm==after --from before --write` on the parent's tree; its JSON report,
    the moves it made (read from the files it changed), exit code and seconds."""
    with tempfile.TemporaryDirectory(prefix="vam-main2main-") as folder:
        tree = Path(folder)
        archive = subprocess.run(["git", f"--git-dir={gitdir}", "archive", f"{sha}^"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "x", "-C", str(tree)], input=archive, check=True)
        command = [sys.executable, "-m", "migrator", "upgrade", f"vllm=={after}", "--from",
                   before, "--write", "--format", "json", "-q", "."]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=False,
                              env=_env())
        seconds = time.perf_counter() - started
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError:
            return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1],
                    "rc": done.returncode, "seconds": seconds, "moves": []}
        made: list[md.Move] = []
        for path in report.get("changed", []):
            if path.endswith(".py"):
                text = show(gitdir, f"{sha}^", path) or ""
                written = (tree / path).read_text(encoding="utf-8", errors="replace")
                made += md.moves(path, md.read_side(text), md.read_side(written))[0]
                # With --write the report's lines are those of the written file; the scores
                # compare them with the parent's.
                for finding in report.get("api_before") or []:
                    if finding["path"] == path:
                        finding["line"] = md.line_before(text, written, finding["line"])
    return {"report": report, "rc": done.returncode, "seconds": seconds, "moves": made}


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def score_moves(human: list[md.Move], made: list[md.Move], human_files: set[str],
                pack: Resolver, broken: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """Reproduced, wrong, extra and missed import moves, each listed with a reason. A move
    the human did not make is `extra`, not wrong, when `broken(old)` says the old import
    fails at the target: the human left a broken import there (vllm-ascend's kv_offload/
    imported vllm.v1.kv_offload.mediums for months after 0.21.0 removed it)."""
    key = {(m.path, m.name, m.old): m for m in human}
    reproduced, wrong, extra = [], [], []
    for move in made:
        theirs = key.get((move.path, move.name, move.old))
        if theirs is not None and theirs.new == move.new:
            reproduced.append({**_as(move), "dual": move.dual})
        elif theirs is not None:
            wrong.append({**_as(move), "why": f"the human moved it to {theirs.new}"})
        elif broken is not None and broken(move.old):
            extra.append({**_as(move), "dual": move.dual,
                          "why": "the old import fails at the target; the human left it"})
        elif move.path not in human_files:
            wrong.append({**_as(move), "why": "the human left this file alone"})
        else:
            wrong.append({**_as(move), "why": f"the human kept {move.old}"})
    done = {(m.path, m.name, m.old, m.new) for m in made}
    missed = [{**_as(m), "why": _why_missed(pack, m.old, m.new)} for m in human
              if (m.path, m.name, m.old, m.new) not in done]
    return {"reproduced": reproduced, "wrong": wrong, "extra": extra, "missed": missed}


def fails_at(after: str) -> Callable[[str], bool]:
    """Whether a dotted import fails (an error of verify-imports) at vllm==`after`; the
    release is read on first use only."""
    from migrator.verify_imports.against import load_dist

    dist: list[Any] = []

    def broken(dotted: str) -> bool:
        if not dist:
            dist.append(load_dist(f"vllm=={after}"))
        return any(f.is_error for f in dist[0].problems(dotted))

    return broken


def _as(move: md.Move) -> dict[str, str]:
    return {"path": move.path, "name": move.name, "old": move.old, "new": move.new}


def _why_missed(resolver: Resolver, old: str, new: str = "") -> str:
    """What the pack's steps in the commit's window say of `old` (-> `new`)."""
    if new and Resolver(resolver.pack).resolve(new).new == old:
        # The file already imported the new path alone; the human wrote the old lane for A.
        return ("the human added the old lane to an import already on the new path "
                "(verify-imports --against A reports that import)")
    found = resolver.resolve(old)
    if found.removed is not None:
        return f"the pack has it removed in {found.removed_step}"
    if found.changed:
        return f"the pack moves it to {found.new}"
    # A main2main commit also follows vLLM's main past B: the move may be a later release's.
    later = Resolver(resolver.pack, resolver.to_version).resolve(old)
    if later.changed and later.hits:
        return (f"the pack moves it to {later.first.new} at {later.first.step}, after the "
                "commit's release (the human followed vLLM main)")
    return "not in the vllm pack"


def known(resolver: Resolver, moves: list[md.Move]) -> int:
    """How many of `moves` the pack's steps in the commit's window make (old -> new)."""
    return sum(resolver.resolve(m.old).new == m.new for m in moves)


def score_api(found: list[dict[str, Any]] | None, sites: dict[str, list[tuple[int, int]]],
              touched: dict[str, list[tuple[int, int]]]) -> dict[str, Any] | None:
    """Signature hunks flagged / missed and false alarms; None without verify-api."""
    if found is None:
        return None

    def inside(ranges: list[tuple[int, int]], line: int) -> bool:
        return any(first <= line <= last for first, last in ranges)

    flagged = missed = 0
    for path, ranges in sites.items():
        for site in ranges:
            hit = any(f["path"] == path and inside([site], f["line"]) for f in found)
            flagged += hit
            missed += not hit
    alarms = [f for f in found if not inside(touched.get(f["path"], []), f["line"])]
    return {"flagged": flagged, "missed": missed, "false_alarms": len(alarms),
            "alarms": alarms[:50]}


def one(gitdir: Path, commit: dict[str, str], pack: Any) -> dict[str, Any]:
    sha = commit["sha"]
    resolver = Resolver(pack, commit["before"], commit["after"])
    human = human_change(gitdir, sha)
    vam = run_vam(gitdir, sha, commit["before"], commit["after"])
    report = vam.get("report", {})
    human_files = {p for p in human["touched"]}
    row: dict[str, Any] = {**commit, "files": human["files"], "lines": human["lines"],
                           "human_moves": [_as(m) | {"dual": m.dual} for m in human["moves"]],
                           "lanes_dropped": [_as(m) for m in human["dropped"]],
                           "known": known(resolver, human["moves"] + human["dropped"]),
                           "vam_rc": vam["rc"], "seconds": round(vam["seconds"], 1),
                           "error": vam.get("error", ""), "compat": report.get("compat", ""),
                           "left": report.get("left", [])}
    row["moves"] = score_moves(human["moves"], vam["moves"], human_files, resolver,
                               fails_at(commit["after"]))
    row["api"] = score_api(report.get("api_before"), human["sites"], human["touched"])
    row["signature_hunks"] = sum(len(r) for r in human["sites"].values())
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ("| commit | title | vLLM | py files | lines imports/sig/gates/other | human moves "
            "| lanes dropped | pack knows | vam reproduced (dual) | wrong (+fixes human left) "
            "| missed | sig hunks "
            "| VAP flagged | false alarms | left | s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        c, m, api = r["lines"], r["moves"], r["api"]
        dual = sum(x["dual"] for x in m["reproduced"])
        flagged = "n/a" if api is None else f"{api['flagged']}/{r['signature_hunks']}"
        alarms = "n/a" if api is None else str(api["false_alarms"])
        title = r["title"].replace("|", "/")[:60]
        status = r["error"] and f" ({r['error'][:40]})"
        lines.append(
            f"| {r['sha'][:10]} | {title} | {r['before']}->{r['after']} | {r['files']} "
            f"| {c['imports']}/{c['signatures']}/{c['gates']}/{c['other']} "
            f"| {len(r['human_moves'])} | {len(r['lanes_dropped'])} | {r['known']} "
            f"| {len(m['reproduced'])} ({dual}) | {len(m['wrong'])} (+{len(m.get('extra', []))}) "
            f"| {len(m['missed'])} "
            f"| {r['signature_hunks']} | {flagged} | {alarms} | {len(r['left'])}{status} "
            f"| {r['seconds']} |")
    return "\n".join(lines) + "\n"


def arguments(doc: str, since: str) -> argparse.ArgumentParser:
    """The options both main2main benchmarks take."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--git-dir", type=Path, default=DEFAULT_GIT)
    parser.add_argument("--since", default=since)
    parser.add_argument("--only", action="append", default=[], metavar="SHA")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--json", type=Path, metavar="OUT")
    parser.add_argument("--list", action="store_true", help="List the commits and stop.")
    return parser


def pick(commits: list[dict[str, str]], args: argparse.Namespace) -> list[dict[str, str]]:
    """The commits `--only` and `--limit` keep."""
    if args.only:
        commits = [c for c in commits if any(c["sha"].startswith(s) for s in args.only)]
    return commits[: args.limit] if args.limit else commits


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__ or "", "0.13.0").parse_args(argv)
    gitdir = ensure_clone(args.git_dir)
    commits = pick(find_commits(gitdir, args.since), args)
    if args.list:
        for c in commits:
            print(f"{c['sha'][:10]} {c['before']} -> {c['after']}  {c['title']}")
        return 0
    pack = load_pack("vllm")
    rows = []
    for commit in commits:
        rows.append(one(gitdir, commit, pack))
        print(f"done {commit['sha'][:10]} ({rows[-1]['seconds']} s)", file=sys.stderr)
    print(markdown(rows), end="")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=list) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
