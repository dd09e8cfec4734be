"""benchmarks/main2main_sync.py on a tiny git repository: which commits are syncs with vLLM
main, the release each is scored against, and how verify-api's findings are split (in the
sync's signature hunks, changed by a later commit of the window, never changed)."""

from __future__ import annotations

from pathlib import Path

from benchmarks import main2main_sync as sync
from tests.upgrade.test_main2main_bench import _commit, _git

ANCHOR = ".github/vllm-main-verified.commit"

START = """
from vllm.engine import helper


def first():
    return helper(1)


def second():
    return helper(
        2,
        old=True,
    )


def third():
    return helper(3)
"""

SYNCED = START.replace("helper(1)", "helper(1, strict=True)")
LATER = SYNCED.replace("        old=True,\n", "        new=True,\n")


def _repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    shas = {
        "start": _commit(repo, {"p/m.py": START, "Dockerfile": "ARG VLLM_TAG=v0.1.0\n",
                                ANCHOR: "a" * 40 + "\n"}, "start"),
        "sync": _commit(repo, {"p/m.py": SYNCED, ANCHOR: "b" * 40 + "\n"},
                        "[Misc] main2main 0101"),
        "later": _commit(repo, {"p/m.py": LATER}, "[Bugfix] a later fix"),
        "docs": _commit(repo, {ANCHOR: "c" * 40 + "\n"}, "[Doc] a typo"),
        "release": _commit(repo, {"Dockerfile": "ARG VLLM_TAG=v0.2.0\n"},
                           "[Main2Main] Upgrade vLLM to v0.2.0"),
    }
    return repo / ".git", shas


def test_a_sync_is_an_anchor_move_under_a_standing_release(tmp_path: Path) -> None:
    gitdir, shas = _repo(tmp_path)
    found = sync.find_syncs(gitdir, "0.1.0")
    # The doc commit moves the anchor too, but its title is not a sync's; the release commit
    # is main2main.py's.
    assert found == [{"sha": shas["sync"], "title": "[Misc] main2main 0101", "before": "0.1.0",
                      "after": "0.2.0", "anchor_old": "a" * 40, "anchor_new": "b" * 40,
                      "window_end": shas["release"]}]


def test_statement_range_is_the_innermost_statement_or_header() -> None:
    source = "@dec\ndef f(\n    a,\n):\n    x = g(\n        1,\n    )\n    return x\n"
    assert sync.statement_range(source, 6) == (5, 7)
    assert sync.statement_range(source, 3) == (1, 4)
    assert sync.statement_range(source, 8) == (8, 8)
    assert sync.statement_range("def (:\n", 1) == (1, 1)


def test_findings_are_flagged_in_hunks_and_followed_to_the_window_end(tmp_path: Path) -> None:
    gitdir, shas = _repo(tmp_path)
    row = sync.find_syncs(gitdir, "0.1.0")[0]
    # On the sync's parent: helper(1) is line 5, the multi-line helper(2, ...) call starts at 9
    # (the hunk of the later commit is inside it, not at its first line), helper(3) is line 16.
    found = [{"path": "p/m.py", "line": n, "col": 12, "code": "VAP006", "message": f"m{n}"}
             for n in (5, 9, 16)]
    human = sync.m2m.human_change(gitdir, shas["sync"])
    after_s = {sync.key(f) for f in found[1:]}
    at_end = {sync.key(found[2])}
    scored = sync.score_api(gitdir, row, found, human["sites"], after_s, at_end)
    assert scored is not None
    assert (scored["flagged"], scored["missed"]) == (1, 0)
    assert [(f["line"]) for f in scored["fixed_in_s_list"]] == [5]
    assert [(f["line"]) for f in scored["fixed_later_list"]] == [9]
    assert [(f["line"]) for f in scored["persist_list"]] == [16]
    unfollowed = sync.score_api(gitdir, row, found, human["sites"], None, at_end)
    assert unfollowed is not None and "persist" not in unfollowed
    assert sync.score_api(gitdir, row, None, {}, None, None) is None


def test_a_hunk_inside_a_multiline_call_is_flagged_by_the_call(tmp_path: Path) -> None:
    gitdir, shas = _repo(tmp_path)
    row = sync.find_syncs(gitdir, "0.1.0")[0]
    # The later commit's hunk (line 11) against a finding at the call's first line (9).
    later = sync.m2m.human_change(gitdir, shas["later"])
    found = [{"path": "p/m.py", "line": 9, "col": 12, "code": "VAP006", "message": "m"}]
    scored = sync.score_api(gitdir, {**row, "sha": shas["later"]}, found, later["sites"],
                            None, None)
    assert scored is not None and (scored["flagged"], scored["missed"]) == (1, 0)
