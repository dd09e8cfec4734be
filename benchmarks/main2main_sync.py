"""vam on vllm-ascend's syncs with vLLM's main branch: does `vam upgrade` write the humans'
dual-lane import moves, and does verify-api flag the signature breaks they fixed?

    PYTHONPATH=. .venv/bin/python benchmarks/main2main_sync.py [--git-dir DIR] [--since 0.14.0]
        [--only SHA]... [--limit N] [--json OUT] [--list] [--from-json OUT]

A sync commit moves the vLLM main commit vllm-ascend is verified against (the anchor in
`.github/vllm-main-verified.commit`, before that `ARG VLLM_COMMIT=` of the lint Dockerfile)
while the release it builds (A, benchmarks/main2main.py reads it) stays; the humans adapt to
the vLLM commits between the two anchors, writing each change in dual-lane form
(`if vllm_version_is("A")`). vLLM's own history is not reachable here (GitHub is not, and
its snapshot is over the size `fetch` brings), so the target is the release B that
vllm-ascend moved to next from A (its next release commit; the next release in the vllm pack
when there is none yet): a commit of vLLM main between A and B is, apart from what changed
again before B, in B. For each sync commit S, on the tree of its parent:
`vam upgrade vllm==B --from A --write --format json` (dual lane for A), then
- import moves: those vam wrote against those the human wrote (main2main.py's scoring);
- verify-api: the human's signature-following hunks in S flagged (a VAP finding on the
  parent whose statement overlaps the hunk) or missed; and the fate of each finding on the
  parent, read by running verify-api (same B, same baseline A) on S's tree and on the tree
  of the commit that moves to B (the window's end): `fixed in S` (gone after S: the humans
  fixed it in this sync, wherever the fix is: `self.runner = runner` in an `__init__` fixes
  41 reads), `fixed later` (gone by the window's end: a break of a vLLM commit after S's
  anchor), `persist` (still reported at the window's end, when vllm-ascend runs on B: false
  alarms, or breaks the humans left; `--json` lists each). Findings are matched by file,
  code and message, not by line.
Prints a Markdown table (for BENCHMARKS.md) and the totals: each window's distinct findings
(a finding repeats on every sync until it is fixed) by fate.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import main2main as m2m
from migrator.core.resolver import Resolver
from rules import load_pack, version_key

_ANCHORS = (".github/vllm-main-verified.commit", ".github/workflows/dockerfiles/Dockerfile.lint")
_SHA = re.compile(r"\b[0-9a-f]{40}\b")
_SYNC_TITLE = re.compile(r"main2main|main2mian|m2m|main\s+to\s+main|vllm\s+main|upgrade|"
                         r"update|adapt", re.I)


def anchor(gitdir: Path, rev: str) -> str | None:
    """The vLLM main commit `rev` is verified against, or None."""
    for path in _ANCHORS:
        text = m2m.show(gitdir, rev, path)
        if text and (found := _SHA.search(text)):
            return found.group(0)
    return None


def find_syncs(gitdir: Path, since: str) -> list[dict[str, str]]:
    """The sync commits, oldest first, each with A, B, its anchors and the window's end."""
    releases = m2m.find_commits(gitdir, since)
    order = m2m.git(gitdir, "rev-list", "--first-parent", "--reverse", "HEAD").split()
    position = {sha: i for i, sha in enumerate(order)}
    log = m2m.git(gitdir, "log", "--first-parent", "--format=%H%x1f%s", "-G", "[0-9a-f]{40}",
                  "HEAD", "--", *_ANCHORS)
    steps = sorted({s.version for s in load_pack("vllm").steps}, key=version_key)
    found = []
    for line in reversed(log.splitlines()):
        sha, _, title = line.partition("\x1f")
        if not _SYNC_TITLE.search(title):
            continue
        before, after = m2m.vllm_release(gitdir, f"{sha}^"), m2m.vllm_release(gitdir, sha)
        old, new = anchor(gitdir, f"{sha}^"), anchor(gitdir, sha)
        if not before or before != after or old == new or not new:
            continue  # a release commit (main2main.py), or no anchor moved
        if version_key(before) < version_key(since):
            continue
        nxt = next((r for r in releases if position.get(r["sha"], -1) > position[sha]
                    and version_key(r["after"]) > version_key(before)), None)
        if nxt is None:
            target = next((v for v in steps if version_key(v) > version_key(before)), None)
        elif version_key(nxt["before"]) > version_key(before):
            target = nxt["before"]  # vllm-ascend reached it in a commit not read as a release one
        else:
            target = nxt["after"]
        if target is None:
            continue
        found.append({"sha": sha, "title": title, "before": before, "after": target,
                      "anchor_old": old or "", "anchor_new": new,
                      "window_end": nxt["sha"] if nxt else "HEAD"})
    return found


def statement_range(source: str | list[tuple[int, int]], line: int) -> tuple[int, int]:
    """The lines of the innermost statement at `line` of `source` (or of its
    `statement_spans`): a simple statement whole, a compound one's header (a `def` with its
    decorators, up to its body); (line, line) when the source does not parse."""
    spans = statement_spans(source) if isinstance(source, str) else source
    best = (line, line)
    for first, last in spans:
        if first <= line <= last and (best == (line, line) or last - first < best[1] - best[0]):
            best = (first, last)
    return best


def statement_spans(source: str) -> list[tuple[int, int]]:
    """(first, last) line of every statement of `source` as `statement_range` reads it."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        body = getattr(node, "body", None)
        last = (body[0].lineno - 1 if isinstance(body, list) and body
                else node.end_lineno or node.lineno)
        spans.append((first, max(last, node.lineno)))
    return spans


def _overlaps(ranges: list[tuple[int, int]], span: tuple[int, int]) -> bool:
    return any(first <= span[1] and span[0] <= last for first, last in ranges)


Key = tuple[str, str, str]


def key(finding: dict[str, Any]) -> Key:
    return finding["path"], finding["code"], finding["message"]


def score_api(gitdir: Path, sync: dict[str, str], found: list[dict[str, Any]] | None,
              sites: dict[str, list[tuple[int, int]]], after_s: set[Key] | None,
              at_end: set[Key] | None) -> dict[str, Any] | None:
    """Signature hunks of S flagged / missed; each finding on S's parent fixed in S, fixed
    later in the window, or persisting at its end (None: that verify-api run failed)."""
    if found is None:
        return None
    parent = f"{sync['sha']}^"
    spans: dict[str, list[tuple[int, int]]] = {}  # each file parsed once

    def span(finding: dict[str, Any]) -> tuple[int, int]:
        path = finding["path"]
        if path not in spans:
            spans[path] = statement_spans(m2m.show(gitdir, parent, path) or "")
        return statement_range(spans[path], finding["line"])

    located = [(f, span(f)) for f in found]
    flagged = missed = 0
    for path, ranges in sites.items():
        for site in ranges:
            hit = any(f["path"] == path and _overlaps([site], s) for f, s in located)
            flagged += hit
            missed += not hit
    result: dict[str, Any] = {"flagged": flagged, "missed": missed, "findings": len(found)}
    if after_s is None or at_end is None:
        return result
    fates: dict[str, list[dict[str, Any]]] = {"fixed_in_s": [], "fixed_later": [], "persist": []}
    for finding in found:
        fate = ("fixed_in_s" if key(finding) not in after_s
                else "fixed_later" if key(finding) not in at_end else "persist")
        fates[fate].append(finding)
    for fate, listed in fates.items():
        result[fate] = len(listed)
        result[f"{fate}_list"] = listed[:100]
    return result


def api_keys(gitdir: Path, rev: str, before: str, after: str,
             memo: dict[tuple[str, str, str], set[Key] | None]) -> set[Key] | None:
    """The findings of `vam verify-api --against vllm==after --from before` on `rev`'s tree,
    as keys; None when the run gives no JSON."""
    if (rev, before, after) in memo:
        return memo[rev, before, after]
    with tempfile.TemporaryDirectory(prefix="vam-main2main-sync-") as folder:
        archive = subprocess.run(["git", f"--git-dir={gitdir}", "archive", rev],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "x", "-C", folder], input=archive, check=True)
        done = subprocess.run([sys.executable, "-m", "migrator", "verify-api", "--against",
                               f"vllm=={after}", "--from", before, "--format", "json", "."],
                              cwd=folder, capture_output=True, text=True, check=False,
                              env=m2m._env())
    try:
        found = json.loads(done.stdout)
    except json.JSONDecodeError:
        found = None
    keys = None if found is None else {key(f) for f in _findings(found)}
    memo[rev, before, after] = keys
    return keys


def _findings(report: Any) -> list[dict[str, Any]]:
    """The findings of verify-api's JSON report (a list, or an object holding one)."""
    if isinstance(report, dict):
        report = report.get("findings", [])
    return [f for f in report if isinstance(f, dict)]


def one(gitdir: Path, sync: dict[str, str], pack: Any,
        memo: dict[tuple[str, str, str], set[Key] | None]) -> dict[str, Any]:
    sha, before, after = sync["sha"], sync["before"], sync["after"]
    resolver = Resolver(pack, before, after)
    human = m2m.human_change(gitdir, sha)
    vam = m2m.run_vam(gitdir, sha, before, after)
    report = vam.get("report", {})
    row: dict[str, Any] = {**sync, "files": human["files"], "lines": human["lines"],
                           "human_moves": [m2m._as(m) | {"dual": m.dual}
                                           for m in human["moves"]],
                           "known": m2m.known(resolver, human["moves"]),
                           "vam_rc": vam["rc"], "seconds": round(vam["seconds"], 1),
                           "error": vam.get("error", "")}
    row["moves"] = m2m.score_moves(human["moves"], vam["moves"], set(human["touched"]),
                                   resolver, m2m.fails_at(after))
    found = report.get("api_before")
    after_s = at_end = None
    if found is not None:
        after_s = api_keys(gitdir, sha, before, after, memo)
        at_end = api_keys(gitdir, sync["window_end"], before, after, memo)
    row["api"] = score_api(gitdir, sync, found, human["sites"], after_s, at_end)
    row["signature_hunks"] = sum(len(r) for r in human["sites"].values())
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ("| commit | title | A -> B | anchor | lines imp/sig/gates/other | human moves (dual) "
            "| pack knows | vam reproduced (dual) | wrong (+fixes) | missed | VAP flagged / sig "
            "hunks | findings: fixed in S / later / persist | s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        c, m, api = r["lines"], r["moves"], r["api"]
        dual = sum(x["dual"] for x in m["reproduced"])
        human_dual = sum(x["dual"] for x in r["human_moves"])
        flagged = "n/a" if api is None else f"{api['flagged']}/{r['signature_hunks']}"
        fates = "n/a" if api is None or "persist" not in api else (
            f"{api['findings']}: {api['fixed_in_s']} / {api['fixed_later']} / {api['persist']}")
        title = r["title"].replace("|", "/")[:48]
        status = r["error"] and f" ({r['error'][:40]})"
        lines.append(
            f"| {r['sha'][:10]} | {title} | {r['before']}->{r['after']} "
            f"| {r['anchor_new'][:8]} | {c['imports']}/{c['signatures']}/{c['gates']}/{c['other']} "
            f"| {len(r['human_moves'])} ({human_dual}) | {r['known']} "
            f"| {len(m['reproduced'])} ({dual}) | {len(m['wrong'])} (+{len(m['extra'])}) "
            f"| {len(m['missed'])} | {flagged} | {fates}{status} | {r['seconds']} |")
    return "\n".join(lines) + "\n"


_REASONS = {"after the commit's release": "a later release's move (the anchor is past B)",
            "added the old lane": "old lane added to a new-path import",
            "removed in": "removed in the pack (reported with a hint)",
            "not in the vllm pack": "not in the pack",
            "the pack moves it to": "the pack moves it elsewhere"}


def totals(rows: list[dict[str, Any]]) -> str:
    """The run's totals: moves, signature hunks (library code and tests apart), and the
    distinct findings of each window (A -> B) by fate."""
    moves = {k: sum(len(r["moves"][k]) for r in rows)
             for k in ("reproduced", "wrong", "extra", "missed")}
    dual = sum(m["dual"] for r in rows for m in r["moves"]["reproduced"])
    human = sum(len(r["human_moves"]) for r in rows)
    out = [f"syncs: {len(rows)}; human import moves {human}, reproduced {moves['reproduced']} "
           f"({dual} dual), wrong {moves['wrong']}, ahead of the human (+) {moves['extra']}, "
           f"missed {moves['missed']}"]
    later = 0
    for i, r in enumerate(rows):
        theirs = {(m["path"], m["name"], m["old"], m["new"]) for x in rows[i + 1:]
                  if (x["before"], x["after"]) == (r["before"], r["after"])
                  for m in x["human_moves"]}
        later += sum((m["path"], m["name"], m["old"], m["new"]) in theirs
                     for m in r["moves"]["extra"])
    out.append(f"of the {moves['extra']} ahead: {later} made by the humans in a later sync of "
               "the same window")
    reasons: dict[str, int] = {}
    for r in rows:
        for m in r["moves"]["missed"]:
            why = _REASONS.get(next((k for k in _REASONS if k in m["why"]), ""), "other")
            reasons[why] = reasons.get(why, 0) + 1
    out.append("missed, by reason: " + ", ".join(f"{v} {k}" for k, v in sorted(reasons.items())))
    api_rows = [r for r in rows if r["api"] is not None]
    flagged = sum(r["api"]["flagged"] for r in api_rows)
    hunks = sum(r["signature_hunks"] for r in api_rows)
    out.append(f"signature hunks flagged: {flagged}/{hunks}")
    windows: dict[tuple[str, str], dict[Key, str]] = {}
    rank = {"persist": 0, "fixed_later": 1, "fixed_in_s": 2}
    for r in api_rows:
        seen = windows.setdefault((r["before"], r["after"]), {})
        for fate in rank:
            for finding in r["api"].get(f"{fate}_list", []):
                old = seen.get(key(finding), "persist")
                seen[key(finding)] = max(old, fate, key=rank.__getitem__)
    for (a, b), seen in windows.items():
        count = {fate: sum(v == fate for v in seen.values()) for fate in rank}
        out.append(f"window {a} -> {b}: {len(seen)} distinct findings, fixed in a sync "
                   f"{count['fixed_in_s']}, fixed later in the window {count['fixed_later']}, "
                   f"persist {count['persist']}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = m2m.arguments(__doc__ or "", "0.14.0")
    parser.add_argument("--from-json", type=Path, metavar="OUT",
                        help="Print the table and totals of an earlier run's --json, run nothing.")
    args = parser.parse_args(argv)
    if args.from_json:
        rows = json.loads(args.from_json.read_text(encoding="utf-8"))
        print(markdown(rows) + "\n" + totals(rows), end="")
        return 0
    gitdir = m2m.ensure_clone(args.git_dir)
    syncs = m2m.pick(find_syncs(gitdir, args.since), args)
    if args.list:
        for s in syncs:
            print(f"{s['sha'][:10]} {s['before']} -> {s['after']} anchor {s['anchor_new'][:8]} "
                  f"(window to {s['window_end'][:10]})  {s['title']}")
        return 0
    pack = load_pack("vllm")
    memo: dict[tuple[str, str, str], set[Key] | None] = {}
    rows = []
    for sync in syncs:
        rows.append(one(gitdir, sync, pack, memo))
        print(f"done {sync['sha'][:10]} ({rows[-1]['seconds']} s)", file=sys.stderr, flush=True)
        if args.json:  # a long run keeps what it has
            args.json.write_text(json.dumps(rows, indent=1, default=list) + "\n",
                                 encoding="utf-8")
    print(markdown(rows) + "\n" + totals(rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
