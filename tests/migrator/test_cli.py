"""The `vam` command line: output formats, exit codes, configuration, explain and rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.migrator.conftest import REPO, vam

OLD = "vllm_ascend.distributed.mooncake_connector"
NEW = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "a.py").write_text(f"from {OLD} import X\n")
    (tmp_path / "b.yaml").write_text(f"path: {OLD}\n")
    (tmp_path / "clean.py").write_text("import os\n")
    return tmp_path


def test_check_text_format_and_exit_codes(tree: Path) -> None:
    result = vam("check", str(tree))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"{tree}/a.py:1:1: VAM001 '{OLD}' moved to '{NEW}' (0.14.0)",
        f"{tree}/b.yaml:1:7: VAM001 '{OLD}' moved to '{NEW}' (0.14.0)",
    ]
    assert "Found 2 stale reference(s) in 2 file(s); 2 fixable" in result.stderr
    clean = vam("check", str(tree / "clean.py"))
    assert (clean.returncode, clean.stdout) == (0, "")


def test_check_json_github_sarif(tree: Path) -> None:
    data = json.loads(vam("check", "--format", "json", str(tree)).stdout)
    assert data[0] == {
        "code": "VAM001", "message": f"'{OLD}' moved to '{NEW}' (0.14.0)", "path": f"{tree}/a.py",
        "line": 1, "column": 1, "kind": "from-import", "old": OLD, "new": NEW, "step": "0.14.0",
        "pack": "vllm_ascend", "fixable": True,
    }
    github = vam("check", "--format", "github", str(tree)).stdout.splitlines()
    assert github[1] == (f"::error title=vam (VAM001),file={tree}/b.yaml,line=1,col=7::VAM001 "
                         f"'{OLD}' moved to '{NEW}' (0.14.0)")
    sarif = json.loads(vam("check", "--format", "sarif", str(tree)).stdout)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    assert run["tool"]["driver"]["name"] == "vam"
    assert [r["ruleId"] for r in run["results"]] == ["VAM001", "VAM001"]
    location = run["results"][1]["locations"][0]["physicalLocation"]
    assert location == {"artifactLocation": {"uri": f"{tree}/b.yaml"},
                        "region": {"startLine": 1, "startColumn": 7}}


def test_migrate_diff_writes_nothing_and_check_flag_exits_1(tree: Path) -> None:
    before = (tree / "a.py").read_text()
    diff = vam("migrate", "--diff", str(tree))
    assert diff.returncode == 0
    assert f"-from {OLD} import X\n+from {NEW} import X\n" in diff.stdout
    assert (tree / "a.py").read_text() == before
    check = vam("migrate", "--check", str(tree))
    assert check.returncode == 1 and check.stdout == ""
    assert "2 would change" in check.stderr
    assert (tree / "a.py").read_text() == before


def test_migrate_summary_by_kind_and_quiet(tree: Path) -> None:
    result = vam("migrate", str(tree))
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        "vam: 3 files scanned, 1 parsed, 2 changed, 0 failed; 2 references rewritten",
        "  from-import  1",
        "  text         1",
    ]
    assert vam("migrate", "-q", str(tree)).stderr == ""


def test_jobs_give_identical_results(tmp_path: Path) -> None:
    for copy in ("one", "two"):
        for i in range(80):  # enough files to use the worker pool
            path = tmp_path / copy / f"m{i}.py"
            path.parent.mkdir(exist_ok=True)
            path.write_text(f"import {OLD}\nX = '{OLD}.Y{i}'\n" if i % 3 else "import os\n")
    one = vam("migrate", "--jobs", "1", str(tmp_path / "one"))
    two = vam("migrate", "--jobs", "2", str(tmp_path / "two"))
    assert one.returncode == two.returncode == 0
    assert one.stderr == two.stderr
    for i in range(80):
        assert (tmp_path / "one" / f"m{i}.py").read_bytes() == (tmp_path / "two" / f"m{i}.py").read_bytes()


def test_pyproject_configuration(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.vam]\nexclude = ["vendored"]\ncomments = false\ntext-files = ["*.py", "*.cfg"]\n')
    (tmp_path / "vendored").mkdir()
    (tmp_path / "vendored" / "x.py").write_text(f"import {OLD}\n")
    (tmp_path / "a.py").write_text(f"import {OLD}  # {OLD}\n")
    (tmp_path / "b.md").write_text(f"{OLD}\n")
    (tmp_path / "c.cfg").write_text(f"{OLD}\n")
    assert vam("migrate", str(tmp_path)).returncode == 0
    assert (tmp_path / "vendored" / "x.py").read_text() == f"import {OLD}\n"
    assert (tmp_path / "a.py").read_text() == f"import {NEW}  # {OLD}\n"
    assert (tmp_path / "b.md").read_text() == f"{OLD}\n"
    assert (tmp_path / "c.cfg").read_text() == f"{NEW}\n"
    assert vam("migrate", "--exclude", "c.cfg", "--check", str(tmp_path)).returncode == 0


def test_module_entry_point_and_help() -> None:
    result = vam("--help")
    assert result.returncode == 0
    for command in ("migrate", "check", "explain", "rules", "verify-imports", "shims"):
        assert command in result.stdout
    assert "Exit status" in vam("migrate", "--help").stdout


def test_no_progress_bar_when_piped(tmp_path: Path) -> None:
    for i in range(250):
        (tmp_path / f"m{i}.py").write_text(f"import {OLD}\n")
    result = vam("migrate", str(tmp_path))
    assert "vam  [" not in result.stderr and "%" not in result.stderr


# -- explain and rules ---------------------------------------------------------------------


STORE = "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store"


def test_explain() -> None:
    # A name passes through every step that moves it: kvpool's submodule in 0.14.0, then
    # backend.backend -> backend.base in 0.27.1rc1.
    result = vam("explain", "vllm_ascend/distributed/kvpool/backend/backend.py")
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "vllm_ascend.distributed.kvpool.backend.backend",
        f"  0.14.0: vllm_ascend.distributed.kvpool.backend.backend -> {STORE}.backend.backend  "
        f"(module move vllm_ascend.distributed.kvpool -> {STORE}, "
        "old path kept by the shims until 0.16.0)",
        f"  0.27.1rc1: {STORE}.backend.backend -> {STORE}.backend.base  "
        f"(module move {STORE}.backend.backend -> {STORE}.backend.base, "
        "old path kept by the shims until 0.29.0)",
        f"  now: {STORE}.backend.base   (rewrite references with `vam migrate`)",
    ]
    # A module move, a symbol rename inside the moved module, then a move of that module;
    # before them the 0.11 store module it came from.
    renamed = vam("explain", "vllm_ascend.distributed.kvpool.config_data.LasyerMultiBlockReqMeta")
    assert renamed.returncode == 0
    assert [line.split("  (")[0].rstrip() for line in renamed.stdout.splitlines()] == [
        "vllm_ascend.distributed.kvpool.config_data.LasyerMultiBlockReqMeta",
        "  0.12.0rc1: new home of "
        "vllm_ascend.distributed.mooncake.config_data.LasyerMultiBlockReqMeta",
        "  0.14.0: vllm_ascend.distributed.kvpool.config_data.LasyerMultiBlockReqMeta -> "
        f"{STORE}.config_data.LasyerMultiBlockReqMeta",
        f"  0.18.0rc1: {STORE}.config_data.LasyerMultiBlockReqMeta -> "
        f"{STORE}.config_data.LayerMultiBlockReqMeta",
        f"  0.27.1rc1: {STORE}.config_data.LayerMultiBlockReqMeta -> "
        f"{STORE}.metadata.LayerMultiBlockReqMeta",
        f"  now: {STORE}.metadata.LayerMultiBlockReqMeta",
    ]
    # Listed as staying put in 0.14.0, removed in 0.24.0rc1: no `now:` line.
    stays = vam("explain", "vllm_ascend.distributed.utils.fc3_all_gather_and_maybe_unpad_impl")
    assert stays.returncode == 0
    assert stays.stdout.splitlines()[1:] == [
        "  0.14.0: stays put (listed in the table)",
        "  0.24.0rc1: removed (vllm_ascend.distributed.utils.fc3_all_gather_and_maybe_unpad_impl), "
        "no replacement: `def fc3_all_gather_and_maybe_unpad_impl(x)` was removed in this release",
    ]
    home = vam("explain", "vllm_ascend.distributed.kv_transfer.utils.utils.align_memory")
    assert "new home of vllm_ascend.distributed.utils.align_memory" in home.stdout
    unknown = vam("explain", "vllm_ascend.platform")
    assert unknown.returncode == 1 and "not in the vllm_ascend table" in unknown.stdout
    bad = vam("explain", "not a name")
    assert bad.returncode == 2 and bad.stderr.startswith("vam: error: not a dotted name")


def test_rules_list_show_validate_export() -> None:
    listed = vam("rules", "list").stdout.splitlines()
    assert listed[0::2] == [  # each pack's line is followed by its description
        "vllm  steps: 0.11.1, 0.12.0, 0.13.0, 0.14.0, 0.15.0, 0.16.0, 0.17.0, 0.18.0, 0.19.0, "
        "0.20.0, 0.21.0, 0.22.0, 0.23.0, 0.24.0, 0.25.0, 0.26.0, 0.27.0, 0.28.0, 0.29.0, 0.30.0, "
        "0.31.0, 0.32.0, 0.33.0  (vllm.toml)",
        "vllm_ascend  steps: 0.7.3, 0.9.1rc2, 0.9.2rc1, 0.10.0rc1, 0.10.2rc1, 0.12.0rc1, "
        "0.13.0rc2, 0.13.0, 0.14.0, 0.18.0rc1, 0.24.0rc1, 0.25.1rc1, 0.27.1rc1, 0.28.0rc1, "
        "0.29.0rc1, 0.30.0rc1  (vllm_ascend.toml)",
    ]
    shown = vam("rules", "show", "vllm_ascend").stdout
    assert "  symbol  vllm_ascend.distributed.register_connector" in shown
    assert "[intermediate]" in shown
    assert "step 0.30.0rc1 (old paths removed in 0.32.0): distributed.eplb modules renamed" in shown
    # Rules are module, symbol and removed rows (stay-put names are not rules): per step
    # 1 + 3 + 3 + 10 + 4 + 26 + 1 + 2 (0.7.3 to 0.13.0), then 16 + 1 + 7 + 3 + 15 + 9 + 5 + 2.
    ok = vam("rules", "validate", str(REPO / "rules" / "vllm_ascend.toml"))
    assert ok.returncode == 0 and "ok (16 step(s), 108 rules)" in ok.stdout
    vllm = vam("rules", "validate", str(REPO / "rules" / "vllm.toml"))
    assert vllm.returncode == 0 and "ok (23 step(s), 213 rules)" in vllm.stdout
    exported = vam("rules", "export", "ruff").stdout
    assert exported.splitlines()[0] == "[tool.ruff.lint.flake8-tidy-imports.banned-api]"
    assert (f'"{OLD}".msg = "moved to {NEW} in 0.14.0; run `vam migrate`"') in exported
    assert ('"vllm_ascend.distributed.eplb.state".msg = "moved to '
            'vllm_ascend.distributed.eplb.eplb_state in 0.30.0rc1; run `vam migrate`"') in exported


def test_runs_where_no_pyproject_is_found(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    (tmp_path / "a.py").write_text(f"import {OLD}\n")
    assert vam("check", "a.py", cwd=tmp_path, env=env).returncode == 1


def test_versions_from_pyproject_apply_unless_flags_override(tmp_path: Path) -> None:
    # Code written for the newest step: no step lies after it.
    (tmp_path / "pyproject.toml").write_text('[tool.vam]\nfrom = "0.30.0rc1"\n')
    (tmp_path / "a.py").write_text(f"import {OLD}\nimport vllm_ascend.distributed.eplb.state\n")
    skipped = vam("check", str(tmp_path))
    assert skipped.returncode == 0 and skipped.stdout == ""
    assert skipped.stderr.startswith(
        "vam: warning: no step of the vllm_ascend table lies after 0.30.0rc1 and up to the end "
        "(steps: 0.7.3, 0.9.1rc2, 0.9.2rc1, 0.10.0rc1, 0.10.2rc1, 0.12.0rc1, 0.13.0rc2, 0.13.0, "
        "0.14.0, 0.18.0rc1, 0.24.0rc1, 0.25.1rc1, 0.27.1rc1, 0.28.0rc1, 0.29.0rc1, "
        "0.30.0rc1); nothing to migrate\n")
    assert "files scanned, 0 stale references (" in skipped.stderr.splitlines()[-1]
    overridden = vam("migrate", "--from", "0.13.0", str(tmp_path))
    assert overridden.returncode == 0
    assert (tmp_path / "a.py").read_text() == (
        f"import {NEW}\nimport vllm_ascend.distributed.eplb.eplb_state\n")


@pytest.mark.parametrize("command", [["migrate"], ["check"], ["shims", "check"]])
def test_jobs_below_one_is_a_usage_error(command: list[str], tmp_path: Path) -> None:
    result = vam(*command, "--jobs", "0", cwd=tmp_path)
    assert result.returncode == 2
    assert "Invalid value for '--jobs' / '-j': 0 is not in the range x>=1." in result.stderr


def test_rule_command_is_listed_and_runs() -> None:
    assert "rule " in vam("--help").stdout
    result = vam("rule", "VAI003")
    assert result.returncode == 0
    assert result.stdout.startswith("VAI003 (error): circular import that breaks at import time\n")


def test_check_summary_counts_unreadable_files_apart_from_references(tree: Path) -> None:
    (tree / "broken.py").write_text(f"import {OLD}\ndef f(:\n")
    result = vam("check", str(tree))
    assert result.returncode == 1
    summary = result.stderr.strip().splitlines()[-1]
    # a.py, b.yaml and broken.py's import are references; broken.py is also VAM901.
    assert summary.startswith("Found 3 stale reference(s) in 3 file(s); 2 fixable"), summary
    assert "; 1 file(s) could not be checked (VAM9xx)" in summary


def test_to_that_is_not_a_step_is_noted(tree: Path) -> None:
    typo = vam("check", "--to", "0.41.0", str(tree))
    assert "vam: note: 0.41.0 is not a step of the vllm_ascend table; applying the steps up to " \
        "0.30.0rc1" in typo.stderr
    step = vam("check", "--to", "0.14.0", str(tree))
    assert "note:" not in step.stderr


def test_diff_header_of_an_absolute_path_has_one_slash(tree: Path) -> None:
    diff = vam("migrate", "--diff", str(tree / "a.py")).stdout.splitlines()
    assert diff[:2] == [f"--- a{tree}/a.py", f"+++ b{tree}/a.py"]


def test_empty_rules_is_a_usage_error(tree: Path) -> None:
    result = vam("check", "--rules", "", str(tree))
    assert result.returncode == 2
    assert "Invalid value for '--rules': empty" in result.stderr


# -- issue 19, "Messages" --------------------------------------------------------------------


def test_relative_rules_path_in_pyproject_is_read_from_the_pyprojects_folder(
    tmp_path: Path,
) -> None:
    # As `exclude` is: a run from another folder must find the same table.
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "t.toml").write_text((REPO / "rules" / "vllm_ascend.toml").read_text())
    (cfg / "pyproject.toml").write_text('[tool.vam]\nrules = "t.toml"\n')
    (cfg / "a.py").write_text(f"import {OLD}\n")
    result = vam("check", "cfg/a.py", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("cfg/a.py:1:1: VAM001"), result.stdout
    # A bundled pack's name is a name, not a path below the pyproject's folder.
    (cfg / "pyproject.toml").write_text('[tool.vam]\nrules = "vllm_ascend"\n')
    assert vam("check", "cfg/a.py", cwd=tmp_path).returncode == 1
    (cfg / "pyproject.toml").write_text('[tool.vam]\nrules = "missing.toml"\n')
    missing = vam("check", "cfg/a.py", cwd=tmp_path)
    assert missing.returncode == 2
    assert f"{cfg / 'missing.toml'}: no such rules file" in missing.stderr, missing.stderr


def test_migrate_check_from_stdin_reports_as_for_a_file(tmp_path: Path) -> None:
    source = f"import {OLD}\n"
    (tmp_path / "a.py").write_text(source)
    on_file = vam("migrate", "--check", "a.py", cwd=tmp_path)
    on_stdin = subprocess.run([sys.executable, "-m", "migrator", "migrate", "--check", "-"],
                              cwd=tmp_path, input=source, capture_output=True, text=True,
                              check=False)
    assert on_file.stderr.startswith("vam: 1 files scanned"), on_file.stderr
    assert (on_stdin.returncode, on_stdin.stdout, on_stdin.stderr) == \
        (on_file.returncode, on_file.stdout, on_file.stderr) == (1, "", on_file.stderr)
    clean = subprocess.run([sys.executable, "-m", "migrator", "migrate", "--check", "-q", "-"],
                           cwd=tmp_path, input="import os\n", capture_output=True, text=True,
                           check=False)
    assert (clean.returncode, clean.stdout, clean.stderr) == (0, "", "")


@pytest.mark.parametrize("name,version", [
    ("vllm_ascend.distributed.llmdatadist_connector", "0.10.0rc1"),
    ("vllm_ascend.distributed.kv_transfer.simple_pipe", "0.10.0rc1"),
    ("vllm_ascend.distributed.mooncake", "0.12.0rc1"),
])
def test_explain_a_name_removed_before_0_13_0(name: str, version: str) -> None:
    result = vam("explain", name)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0] == name and len(lines) == 2, result.stdout
    # The release, the word and the hint (what replaced it), with no `now:` line after.
    assert lines[1].startswith(f"  {version}: removed ({name}), no replacement: ")
    assert "LLMDataDistCMgrConnector" in lines[1] or "kvpool" in lines[1]
