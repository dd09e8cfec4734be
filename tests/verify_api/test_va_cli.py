"""`vam verify-api` on the command line: formats, exit codes, notes, baseline files."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from tests.verify_api.conftest import Tree, invoke, write
from tests.verify_api.releases import NEW, OLD, PLUGIN


@pytest.fixture
def project(tree: Tree) -> Path:
    root = tree({f"old/{k}": v for k, v in OLD.items()})
    write(root, {f"new/{k}": v for k, v in NEW.items()})
    return write(root, PLUGIN)


def test_text_report_exit_1_and_where_the_baseline_came_from(project: Path) -> None:
    result = invoke("--against", "new", "--from", "old", "--upstream", "vllm", "plugin")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 15
    assert ("plugin/ops.py:5:5: VAP001 plugin.ops.AscendOp.forward_oot overrides "
            "vllm.layers.CustomOp.forward_oot(x, residual=..., scale=...): it does not accept "
            "'scale' (new since old)") in lines
    assert "plugin/calls.py:8:5: VAP006 replace_parameter(...) passes keyword 'prefer_copy', " \
        "not taken at new: vllm.utils.replace_parameter(layer, name, tensor)" in lines
    notes = result.stderr.splitlines()
    assert notes[0] == "vam: baseline old"  # a DIST given as --from needs no word on it
    assert notes[-1].startswith("vam verify-api (old -> new): 14 errors, 1 warning in 4 files; "
                                "5 files scanned")


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_every_format(project: Path, fmt: str) -> None:
    result = invoke("--against", "new", "--from", "old", "--upstream", "vllm", "--format", fmt,
                    "-q", "plugin/ops.py")
    assert result.exit_code == 1
    assert result.stderr == ""
    if fmt == "json":
        first = json.loads(result.stdout)[0]
        assert first["code"] == "VAP001" and first["object"] == \
            "vllm.layers.CustomOp.forward_oot(scale)"
        assert first["scope"] == "plugin.ops.AscendOp.forward_oot"
    elif fmt == "sarif":
        run = json.loads(result.stdout)["runs"][0]
        assert [r["ruleId"] for r in run["results"]][:2] == ["VAP001", "VAP002"]
        assert "VAP100" in [r["id"] for r in run["tool"]["driver"]["rules"]]
    else:
        assert result.stdout.startswith("::error file=plugin/ops.py,line=5,col=5,title=")


def test_clean_code_exits_0(project: Path) -> None:
    write(project, {"clean/__init__.py": "from vllm.utils import make_table\n"
                                         "make_table(1, 'cpu')\n"})
    result = invoke("--against", "new", "--from", "old", "--upstream", "vllm", "clean")
    assert (result.exit_code, result.stdout) == (0, "")


def test_a_baseline_file_holds_known_findings_and_new_ones_fail(project: Path) -> None:
    args = ("--against", "new", "--from", "old", "--upstream", "vllm")
    written = invoke(*args, "--write-baseline", "known.json", "plugin")
    assert written.exit_code == 0
    rows = json.loads((project / "known.json").read_text())["findings"]
    assert {"path": "plugin/ops.py", "code": "VAP002", "count": 1,
            "object": "plugin.ops.AscendOp.load -> vllm.layers.CustomOp.load(strict)"} in rows
    # Lines above the findings move: the baseline still holds them (no line numbers).
    ops = project / "plugin/ops.py"
    ops.write_text("# a new first line\n" + ops.read_text())
    held = invoke(*args, "--baseline", "known.json", "plugin")
    assert (held.exit_code, held.stdout) == (0, "")
    assert "15 in the baseline" in held.stderr
    write(project, {"plugin/more.py": "from vllm.utils import make_table\nmake_table(2)\n"})
    new = invoke(*args, "--baseline", "known.json", "plugin")
    assert new.exit_code == 1
    assert new.stdout.startswith("plugin/more.py:2:1: VAP007 make_table(...) leaves out device")


def test_without_a_baseline_it_says_so(project: Path) -> None:
    result = invoke("--against", "new", "--upstream", "vllm", "plugin/calls.py")
    assert "uses are compared against new alone" in result.stderr
    assert result.exit_code == 1


@pytest.mark.parametrize(("args", "message"), [
    (["--against", "nowhere", "plugin"], "nowhere: no such file or directory"),
    (["--against", "new", "--upstream", "no-pkg", "plugin"], "--upstream 'no-pkg': not a"),
    (["--against", "new", "--baseline", "missing.json", "plugin"], "--baseline missing.json"),
    (["--against", "new", "--upstream", "torch", "plugin"], "new ships no such package"),
    (["--against", "new", "--from", "old", "absent"], "no such file or directory: absent"),
])
def test_usage_errors_are_one_line_exit_2(project: Path, args: list[str], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith("vam: error: ") and message in result.stderr
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(("args", "message"), [
    (["--against", ""], "--against is empty: give a source tree, an sdist, a wheel, "
                        "NAME==VERSION or REPO@REV"),
    (["--against", " "], "--against is empty"),
    (["--against", "vllm>=0.3"], "--against 'vllm>=0.3': expected NAME==VERSION"),
    (["--against", "vllm=="], "--against 'vllm==': expected NAME==VERSION"),
    (["--against", "vllm==banana"], "--against 'vllm==banana': 'banana' is not a version"),
    (["--against", "new", "--from", ""], "--from is empty: give a VERSION or a DIST"),
    (["--against", "new", "--from", "vllm~=0.30"], "--from 'vllm~=0.30': expected NAME=="),
])
def test_a_dist_that_is_no_dist_is_a_usage_error_before_anything_is_read(
        project: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str) -> None:
    """An empty DIST used to check the current folder as the release; a requirement other
    than NAME==VERSION was reported as a missing file, or (--from) passed over."""
    import migrator.verify_api

    def never(*_: object) -> None:
        raise AssertionError("read")

    monkeypatch.setattr(migrator.verify_api, "verify_api", never)
    result = invoke(*args, "plugin")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"vam: error: {message}"), result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stdout == ""


def test_the_baseline_is_the_projects_pin_fetched_as_a_dist(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "sdists"
    cache.mkdir()
    with tarfile.open(cache / "vllm-0.30.0.tar.gz", "w:gz") as tar:
        tar.add(project / "old", arcname="vllm-0.30.0")
    monkeypatch.setenv("VAM_SDIST_CACHE", str(cache))
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "no-index").as_uri())
    write(project, {"pyproject.toml": '[project]\nname = "plugin"\n'
                                      'dependencies = ["vllm==0.30.0"]\n'})
    pinned = invoke("--against", "new", "--upstream", "vllm", "plugin")
    assert pinned.stderr.splitlines()[0] == \
        "vam: baseline vllm==0.30.0 (pyproject.toml: vllm==0.30.0)"
    assert len(pinned.stdout.splitlines()) == 15
    write(project, {"pyproject.toml": '[project]\nname = "plugin"\n'
                                      'dependencies = ["vllm==0.29.0"]\n'})
    unreachable = invoke("--against", "new", "--upstream", "vllm", "plugin")
    first = unreachable.stderr.splitlines()[0]
    assert first.startswith("vam: cannot open the baseline vllm==0.29.0 (")
    assert first.endswith("): uses are compared against new alone")


def test_a_target_that_ships_no_package_is_a_usage_error(project: Path) -> None:
    """An empty folder used to be checked as a release: no upstream packages, 0 errors."""
    (project / "empty").mkdir()
    result = invoke("--against", "empty", "plugin")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "vam: error: empty ships no Python package\n"


@pytest.mark.parametrize(("given", "message"), [
    ("banana", "vam: error: --from banana: neither a version nor a DIST (banana: no such "
               "file or directory)"),
    ("0.99.0", "vam: error: --from 0.99.0: cannot open vllm==0.99.0: "),
    ("vllm==0.99.0", "vam: error: --from vllm==0.99.0: "),
])
def test_a_typed_baseline_that_cannot_be_opened_is_a_usage_error(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str,
        message: str) -> None:
    """It used to fall back to "no baseline" with a note, exit 0 on clean code: the user
    asked for a comparison that never happened. (A pin that cannot be opened still falls
    back: see test_the_baseline_is_the_projects_pin_fetched_as_a_dist.)"""
    monkeypatch.setenv("VAM_SDIST_CACHE", str(tmp_path / "no-sdists"))
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "no-index").as_uri())
    result = invoke("--against", "new", "--from", given, "--upstream", "vllm", "plugin")
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.stderr.startswith(message), result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_baseline_of_another_distribution_is_a_usage_error(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--against vllm==X --from vllm_ascend==Y` compared two projects: refused before
    anything is fetched."""
    import migrator.verify_api.run as run

    def never(*_: object, **__: object) -> None:
        raise AssertionError("fetched")

    monkeypatch.setattr(run, "resolve", never)
    result = invoke("--against", "vllm==0.21.0", "--from", "vllm_ascend==0.13.0", "plugin")
    assert result.exit_code == 2, result.output
    assert result.stderr == ("vam: error: --from vllm_ascend==0.13.0 is a release of "
                             "vllm-ascend, not of vllm (--against vllm==0.21.0): give a "
                             "release of vllm\n")


def test_a_file_that_does_not_parse_is_reported(project: Path) -> None:
    """It used to be left out in silence (`0 files scanned`, exit 0)."""
    write(project, {"broken/__init__.py": "from vllm.utils import make_table\n",
                    "broken/bad.py": "def f(:\n    pass\n"})
    result = invoke("--against", "new", "--from", "old", "--upstream", "vllm", "broken")
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == [
        "broken/bad.py:1:7: VAP900 broken/bad.py could not be parsed (invalid syntax): its "
        "uses were not checked"]
    assert "2 files scanned" in result.stderr
