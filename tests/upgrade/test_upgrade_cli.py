"""`vam upgrade NAME==VERSION`: check, migrate in dual-lane form, check again, and the report
of what is left for a person, on a small plugin against a two-version `vllm` given as trees."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrator.cli import main
from migrator.rewrite.engine import Options
from migrator.upgrade import dual_lane
from migrator.upgrade.lanes import dead_lines
from tests.verify_api.conftest import write

# vllm 2.0.0 as a tree: `vllm.old` moved to `vllm.new`, `vllm.gone` removed, `vllm.keep` stays.
VLLM_2 = {
    "pyproject.toml": '[project]\nname = "vllm"\nversion = "2.0.0"\n',
    "vllm/__init__.py": "",
    "vllm/new.py": "def thing():\n    return 1\n",
    "vllm/keep.py": "class Base:\n    def forward(self, x, *, scale):\n        return x\n",
}

# vllm 1.0.0, the plugin's pin: the baseline verify-api compares with (an sdist in the cache).
VLLM_1 = {
    "pyproject.toml": '[project]\nname = "vllm"\nversion = "1.0.0"\n',
    "vllm/__init__.py": "",
    "vllm/old.py": "def thing():\n    return 1\n",
    "vllm/gone.py": "def helper(x):\n    return x\n",
    "vllm/keep.py": "class Base:\n    def forward(self, x):\n        return x\n",
}

PACK = """
[pack]
name = "fakevllm"
description = "two releases of a fake vllm"
packages = ["vllm"]

[[step]]
version = "2.0.0"
summary = "vllm.old -> vllm.new; vllm.gone removed"

[[step.module]]
old = "vllm.old"
new = "vllm.new"

[[step.removed]]
old = "vllm.gone"
hint = "use vllm.keep.Base instead"
"""

PLUGIN = {
    "pyproject.toml": '[project]\nname = "plugin"\ndependencies = ["vllm==1.0.0"]\n'
                      '[tool.vam]\nversion-helper-module = "plugin.utils"\n',
    "plugin/__init__.py": "",
    "plugin/utils.py": "def vllm_version_is(version):\n    return version == '1.0.0'\n",
    "plugin/a.py": """
        from vllm.old import thing
        from vllm.keep import Base
        from vllm.gone import helper
        from vllm.keep import Missing


        class Mine(Base):
            def forward(self, x):
                return thing() + helper(x)
    """,
}

CLEAN = {
    "pyproject.toml": '[project]\nname = "plugin"\ndependencies = ["vllm==1.0.0"]\n'
                      '[tool.vam]\nversion-helper-module = "plugin.utils"\n',
    "plugin/__init__.py": "",
    "plugin/utils.py": "def vllm_version_is(version):\n    return version == '1.0.0'\n",
    "plugin/a.py": "from vllm.old import thing\nfrom vllm.keep import Base\n",
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VAM_INDEX_CACHE", str(tmp_path / "index"))
    write(tmp_path / "vllm2", VLLM_2)
    write(tmp_path / "vllm-1.0.0", VLLM_1)
    cache = tmp_path / "sdists"
    cache.mkdir()
    with tarfile.open(cache / "vllm-1.0.0.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "vllm-1.0.0", arcname="vllm-1.0.0")
    monkeypatch.setenv("VAM_SDIST_CACHE", str(cache))
    (tmp_path / "pack.toml").write_text(PACK, encoding="utf-8")
    return tmp_path


def _run(root: Path, files: dict[str, str], *extra: str,
         targets: tuple[str, ...] = ("plugin",)) -> tuple[int, str, str]:
    write(root / "proj", files)
    args = ["upgrade", "vllm==2.0.0", "--rules", str(root / "pack.toml"),
            "--dist", str(root / "vllm2"), *extra, *targets]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root / "proj")
        result = CliRunner().invoke(main, args)
    return result.exit_code, result.stdout, result.stderr


def test_report_groups_what_is_left_and_exits_1(project: Path) -> None:
    code, out, err = _run(project, PLUGIN)
    assert code == 1, (out, err)
    assert "vam: --from 1.0.0" in err  # the baseline, from the project's pin, is said
    assert "+    from vllm.new import thing" in out, out  # the diff, nothing written
    assert (project / "proj/plugin/a.py").read_text().startswith("from vllm.old import thing")
    assert "before: 3 import(s) fail" in out
    assert "after: 2 import(s) fail" in out
    assert "module reorganisation: imports that still fail (1)" in out, out
    modules = out.index("module reorganisation: imports that still fail (1)")
    removed = out.index("removed names (1)")
    assert modules < removed  # the guide's order
    # Lines of the file on disk, which the diff has not changed: `Missing` is on line 4.
    assert "plugin/a.py:4:23: VAI001 cannot import name 'Missing'" in out[modules:removed]
    assert "plugin/a.py:3:1: VAM003" in out[removed:]
    assert "use vllm.keep.Base instead" in out[removed:]


def test_write_applies_and_json_reports(project: Path) -> None:
    code, out, err = _run(project, PLUGIN, "--write", "--format", "json")
    assert code == 1, err
    data = json.loads(out)
    assert data["baseline"] == "1.0.0" and data["written"] is True
    assert data["changed"] == ["plugin/a.py"]
    assert [(i["group"], i["code"], i["line"]) for i in data["left"]] == [
        ("module reorganisation: imports that still fail", "VAI001", 8),
        ("signature changes of overridden methods", "VAP001", 12),
        ("removed names", "VAM003", 7),
    ]
    written = (project / "proj/plugin/a.py").read_text().splitlines()
    assert "vllm.new" in "\n".join(written)
    # Every line named is one of the file as written, migrate's finding too.
    assert "Missing" in written[7] and "def forward" in written[11]
    assert "vllm.gone" in written[6]
    assert [f["line"] for f in data["api_before"]] == [12]


def test_nothing_left_exits_0(project: Path) -> None:
    code, out, err = _run(project, CLEAN)
    assert code == 0, (out, err)
    assert "Nothing left for a person." in out
    assert "before: 1 import(s) fail" in out and "after: 0 import(s) fail" in out


def test_usage_errors_exit_2(project: Path) -> None:
    write(project / "proj", CLEAN)
    runner = CliRunner()
    bad = runner.invoke(main, ["upgrade", "vllm", "proj"])
    assert bad.exit_code == 2 and "expected NAME==VERSION" in bad.stderr
    missing = runner.invoke(main, ["upgrade", "vllm==2.0.0", "--rules", str(project / "pack.toml"),
                                   "--dist", str(project / "nowhere"), str(project / "proj")])
    assert missing.exit_code == 2 and missing.stderr.startswith("vam: error: ")
    assert "nowhere" in missing.stderr and len(missing.stderr.splitlines()) == 1


@pytest.mark.parametrize(("dist", "message"), [
    ("", "vam: error: --dist is empty: give a source tree"),
    ("vllm>=2.0.0", "vam: error: --dist 'vllm>=2.0.0': expected NAME==VERSION"),
    ("vllm==", "vam: error: --dist 'vllm==': expected NAME==VERSION"),
])
def test_a_dist_that_is_no_dist_is_refused_before_fetching(
        project: Path, monkeypatch: pytest.MonkeyPatch, dist: str, message: str) -> None:
    """An empty --dist used to fall back to fetching NAME==VERSION."""
    import migrator.verify_imports

    def no_network(*_: object, **__: object) -> None:
        raise AssertionError("fetched")

    monkeypatch.setattr(migrator.verify_imports, "load_dist", no_network)
    write(project / "proj", CLEAN)
    bad = CliRunner().invoke(main, ["upgrade", "vllm==2.0.0", "--dist", dist,
                                    str(project / "proj")])
    assert bad.exit_code == 2, bad.output
    assert bad.stderr.startswith(message) and len(bad.stderr.splitlines()) == 1


def test_a_dist_of_another_release_is_refused(project: Path) -> None:
    write(project / "proj", CLEAN)
    args = ["--rules", str(project / "pack.toml"), "--dist", str(project / "vllm2"),
            str(project / "proj")]
    other = CliRunner().invoke(main, ["upgrade", "vllm==3.0.0", *args])
    assert other.exit_code == 2, other.output
    assert "it is version 2.0.0, not 3.0.0" in other.stderr
    assert len(other.stderr.splitlines()) == 1


def test_a_requirement_that_is_no_version_is_refused_before_fetching(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import migrator.verify_imports

    def no_network(*_: object, **__: object) -> None:
        raise AssertionError("fetched")

    monkeypatch.setattr(migrator.verify_imports, "load_dist", no_network)
    banana = CliRunner().invoke(main, ["upgrade", "vllm==banana", str(project)])
    assert banana.exit_code == 2, banana.output
    assert "'banana' is not a version" in banana.stderr


def test_old_lane_of_a_dual_lane_block_is_not_reported(project: Path) -> None:
    lanes = dict(CLEAN)
    lanes["plugin/a.py"] = """
        from plugin.utils import vllm_version_is

        if vllm_version_is("1.0.0"):
            from vllm.old import thing
        else:
            from vllm.new import thing
    """
    lanes["plugin/utils.py"] = "def vllm_version_is(v):\n    return False\n"
    code, out, err = _run(project, lanes)
    assert code == 0, (out, err)
    assert "before: 0 import(s) fail" in out


def test_dead_lines_follow_the_guard_at_the_target() -> None:
    source = (b'if vllm_version_is("1.0.0"):\n    a = 1\nelse:\n    b = 2\n'
              b'x = 1 if vllm_version_ge("2.0.0") else 0\n')
    helpers = ("vllm_version_is", "vllm_version_ge")
    assert dead_lines(source, helpers, "2.0.0") == {2}
    # At 1.0.0 and later both branches may run: nothing is dead.
    assert dead_lines(source, helpers, "1.0.0") == set()
    negated = b'if not vllm_version_ge("2.0.0"):\n    a = 1\nelse:\n    b = 2\n'
    assert dead_lines(negated, helpers, "2.0.0") == {2}


def test_plain_migrate_is_said_when_keep_compat_is_missing() -> None:
    options, form, note = dual_lane(Options(), "1.0.0", "if")
    if "keep_compat" in Options.__dataclass_fields__:
        assert form == "if" and options.keep_compat  # type: ignore[attr-defined] == "1.0.0" and not note
    else:
        assert form == "plain" and "no --keep-compat" in note and options == Options()


def test_verify_api_findings_are_grouped_by_pattern(project: Path) -> None:
    """verify-api compares the plugin's pin (1.0.0, from the sdist cache) with 2.0.0: the
    override that lacks 2.0.0's new required `scale` lands in its group, in the guide's
    order, on the original file's path."""
    code, out, err = _run(project, PLUGIN)
    assert code == 1, err
    order = [out.index(h) for h in ("module reorganisation: imports that still fail (1)",
                                    "signature changes of overridden methods (1)",
                                    "removed names (1)")]
    assert order == sorted(order)
    assert "plugin/a.py:8:5: VAP001" in out  # the file on disk: nothing was written
    assert "verify-api was not run" not in out


def test_json_carries_verify_api_findings_before_the_migration(project: Path) -> None:
    code, out, err = _run(project, PLUGIN, "--format", "json")
    assert code == 1, err
    data = json.loads(out)
    assert [(f["path"], f["line"], f["code"]) for f in data["api_before"]] == [
        ("plugin/a.py", 8, "VAP001")]
    assert data["before"]["api"] == 1 and data["after"]["api"] == 1


def test_only_imports_of_the_distribution_are_reported(project: Path) -> None:
    """A broken relative import is verify-imports' business, not the upgrade's."""
    files = dict(CLEAN)
    files["plugin/a.py"] = "from vllm.new import thing\n"
    files["tools/bench.py"] = "from .helpers import x\n"  # a script, in no package
    code, out, err = _run(project, files, targets=("plugin", "tools"))
    assert code == 0, (out, err)
    assert "before: 0 import(s) fail" in out


@pytest.mark.parametrize("target", ["plugin", "plugin/sub", "plugin/sub/a.py"])
def test_a_file_in_a_package_is_named_by_its_package(project: Path, target: str) -> None:
    """The check after the migration reads a copy: the package folders above a file or
    folder given go with it, so its classes keep their dotted names (`plugin.sub.a.Mine`,
    not `a.Mine`), as in a run on the whole package."""
    files = {k.replace("plugin/a.py", "plugin/sub/a.py"): v for k, v in PLUGIN.items()}
    files["plugin/sub/__init__.py"] = ""
    code, out, err = _run(project, files, targets=(target,))
    assert code == 1, err
    assert ("plugin/sub/a.py:8:5: VAP001 plugin.sub.a.Mine.forward overrides "
            "vllm.keep.Base.forward(x, *, scale)") in out, out


@pytest.mark.parametrize(("code", "message", "group"), [
    ("VAP006", "LLM.generate(...) passes keyword 'override_generation_config', not taken at "
               "0.21.0: vllm.LLM.generate(prompts, sampling_params, *, "
               "override_generation_config_signature)", "calls with changed parameters"),
    ("VAP005", "super().forward(...) passes keyword 'scale', not taken at 2.0.0: "
               "vllm.keep.Base.forward(x)", "signature changes of overridden methods"),
    ("VAP007", "Sampler(...) leaves out overrides, required at 2.0.0: "
               "vllm.sample.Sampler(overrides)", "calls with changed parameters"),
    ("VAP008", "'override_pooler_config' is not an attribute of vllm.config.ModelConfig at "
               "2.0.0 (defined at 1.0.0)", "moved or removed attributes"),
    ("VAP001", "plugin.a.Mine.forward overrides vllm.keep.Base.forward(x, *, scale)",
     "signature changes of overridden methods"),
    ("VAP009", "plugin.a.Mine lacks vllm.keep.Base.run, abstract at 2.0.0",
     "signature changes of overridden methods"),
    ("VAP900", "plugin/a.py could not be parsed (invalid syntax): its uses were not checked",
     "files vam could not process"),
    ("VAP100", "plugin.a.Mine.old overrides vllm.keep.Base.old, gone at 2.0.0",
     "signature changes of overridden methods"),
])
def test_verify_api_findings_are_filed_by_code_not_by_message(
        code: str, message: str, group: str) -> None:
    """Filed by code: a call or an attribute whose message says `override...` is no
    override, a super() call is one."""
    from migrator.upgrade.api import pattern
    from migrator.verify_api.findings import ApiFinding

    assert pattern(ApiFinding("plugin/a.py", 3, 5, code, message)) == group


@pytest.mark.parametrize(("requirement", "dist", "message"), [
    # A release of another distribution: its version matches, its name does not.
    ("vllm==2.0.0", "vllm_ascend-2.0.0.tar.gz",
     "it is a release of vllm-ascend, not of vllm"),
    ("vllm==2.0.0", "empty", "empty ships no Python package"),
    # NAME is not the distribution the pack's steps are versions of.
    ("vllm_ascend==2.0.0", "vllm2",
     "vllm_ascend==2.0.0: the fakevllm pack describes vllm, not vllm-ascend"),
])
def test_a_dist_or_name_of_another_distribution_is_refused(
        project: Path, requirement: str, dist: str, message: str) -> None:
    write(project / "proj", CLEAN)
    (project / "empty").mkdir()
    with tarfile.open(project / "vllm_ascend-2.0.0.tar.gz", "w:gz") as tar:
        tar.add(project / "vllm2", arcname="vllm_ascend-2.0.0")
    result = CliRunner().invoke(main, ["upgrade", requirement, "--rules",
                                       str(project / "pack.toml"), "--dist",
                                       str(project / dist), str(project / "proj")])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("vam: error: ") and message in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_name_the_bundled_pack_does_not_describe_is_refused(project: Path) -> None:
    """`vam upgrade vllm==0.21.0 --rules vllm_ascend` would apply vllm-ascend's steps up to
    a vLLM version: refused, naming both, before anything is fetched."""
    write(project / "proj", CLEAN)
    result = CliRunner().invoke(main, ["upgrade", "vllm==0.21.0", "--rules", "vllm_ascend",
                                       str(project / "proj")])
    assert result.exit_code == 2, result.output
    assert result.stderr == ("vam: error: vllm==0.21.0: the vllm_ascend pack describes "
                             "vllm-ascend, not vllm; give vllm-ascend==VERSION, or --rules "
                             "for vllm\n")


def _copied(monkeypatch: pytest.MonkeyPatch) -> list[set[str]]:
    """Records the files of each copy the check after the migration reads (paths below the
    copy's top folder)."""
    from migrator.upgrade import run as upgrade_run

    seen: list[set[str]] = []
    real_check = upgrade_run.check

    def check(*args: object, **kwargs: object) -> object:
        root = Path(str(args[5]))
        if root.name.startswith("vam-upgrade-"):
            seen.append({str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()})
        return real_check(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(upgrade_run, "check", check)
    return seen


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_in_the_tree_is_neither_opened_nor_copied(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(project / "proj", PLUGIN)
    os.mkfifo(project / "proj/plugin/fifo.py")
    seen = _copied(monkeypatch)
    code, out, err = _run(project, PLUGIN)
    assert code == 1, (out, err)
    assert "Traceback" not in err and "after: 2 import(s) fail" in out, (out, err)
    assert len(seen) == 1 and not any(p.endswith("fifo.py") for p in seen[0]), seen


def test_the_copy_holds_only_the_files_migrate_reads(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --write the checks read a copy: of the files migrate selects (less --exclude
    and .gitignore'd paths) and the package `__init__.py` files above them, nothing more."""
    files = {**PLUGIN, "plugin/.gitignore": "big.bin\n", "plugin/ignored.py": "import os\n",
             "plugin/excluded.py": "import os\n"}
    files["plugin/.gitignore"] = "big.bin\nignored.py\n"
    write(project / "proj", files)
    (project / "proj/plugin/big.bin").write_bytes(b"\0" * (4 << 20))
    (project / "proj/plugin/data").mkdir()
    (project / "proj/plugin/data/huge.bin").write_bytes(b"\0" * (4 << 20))
    seen = _copied(monkeypatch)
    code, out, err = _run(project, files, "--exclude", "excluded.py",
                          "--exclude", "data", targets=("plugin/a.py", "plugin"))
    assert code == 1, (out, err)
    assert "after: 2 import(s) fail" in out, out
    assert len(seen) == 1, seen
    names = {Path(p).name for p in seen[0]}
    assert {"a.py", "__init__.py", "utils.py"} <= names, names
    assert not names & {"big.bin", "huge.bin", "ignored.py", "excluded.py"}, names


def test_a_baseline_after_the_target_names_the_target_not_a_to_flag(project: Path) -> None:
    """`upgrade` has no `--to`: the error names the requirement the user gave."""
    write(project / "proj", CLEAN)
    result = CliRunner().invoke(main, ["upgrade", "vllm==2.0.0", "--from", "9.0.0", "--rules",
                                       str(project / "pack.toml"), "--dist",
                                       str(project / "vllm2"), str(project / "proj")])
    assert result.exit_code == 2, result.output
    assert result.stderr == "vam: error: --from 9.0.0 is after the target vllm==2.0.0\n"
