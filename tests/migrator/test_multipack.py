"""Several move tables in one run: `--rules vllm_ascend,vllm`, `[tool.vam] rules = [...]`,
versions by pack (`--to vllm=0.12.0`, `to = { vllm = "0.12.0" }`), and the usage errors of
bare versions and overlapping packs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import rules
from migrator.core.discover import SourceFile
from migrator.rewrite.engine import Options
from migrator.rewrite.lanes import Chain, Lane
from tests.migrator.conftest import vam

ASCEND_OLD = "vllm_ascend.distributed.mooncake_connector"
ASCEND_NEW = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"
# vllm pack: 0.11.1 and 0.12.0 steps.
VLLM_OLD, VLLM_NEW = "vllm.utils.DeviceMemoryProfiler", "vllm.utils.mem_utils.DeviceMemoryProfiler"
LATER_OLD, LATER_NEW = "vllm.attention.Attention", "vllm.attention.layer.Attention"
# The vLLM release every test's code is written for (a run would otherwise take the installed
# vLLM, whatever this machine has, as the baseline).
VLLM_FROM = ("--from", "vllm=0.11.0")
BOTH = ("--rules", "vllm_ascend,vllm")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "a.py").write_text(
        "from vllm_ascend.distributed.utils import align_memory, own_helper\n"
        f"from {VLLM_OLD.rpartition('.')[0]} import DeviceMemoryProfiler\n"
        f"from {LATER_OLD.rpartition('.')[0]} import Attention\n"
        f"import {ASCEND_OLD} as mc\n"
        f'PATCH = "{VLLM_OLD}"\n'
    )
    (tmp_path / "deploy.yaml").write_text(f"module: {ASCEND_OLD}\nprofiler: {VLLM_OLD}\n")
    return tmp_path


def test_a_comma_list_migrates_both_kinds_of_names_in_one_pass(tree: Path) -> None:
    result = vam("migrate", *BOTH, *VLLM_FROM, str(tree))
    assert result.returncode == 0, result.stderr
    assert "2 files scanned, 1 parsed, 2 changed" in result.stderr
    text = (tree / "a.py").read_text()
    assert text == (
        "from vllm_ascend.distributed.kv_transfer.utils.utils import align_memory\n"
        "from vllm_ascend.distributed.utils import own_helper\n"
        "from vllm.utils.mem_utils import DeviceMemoryProfiler\n"
        "from vllm.model_executor.layers.attention import Attention\n"
        f"import {ASCEND_NEW} as mc\n"
        f'PATCH = "{VLLM_NEW}"\n'
    )
    assert (tree / "deploy.yaml").read_text() == f"module: {ASCEND_NEW}\nprofiler: {VLLM_NEW}\n"
    again = vam("migrate", "--check", *BOTH, *VLLM_FROM, str(tree))
    assert again.returncode == 0 and "0 would change" in again.stderr, again.stderr
    check = vam("check", *BOTH, str(tree))
    assert (check.returncode, check.stdout) == (0, "")


def test_one_pack_alone_leaves_the_other_packs_names(tree: Path) -> None:
    vam("migrate", "--rules", "vllm", *VLLM_FROM, str(tree))
    text = (tree / "a.py").read_text()
    assert VLLM_NEW.rpartition(".")[0] in text and ASCEND_OLD in text


def test_configured_list_and_versions_by_pack(tree: Path) -> None:
    (tree / "pyproject.toml").write_text(
        '[tool.vam]\nrules = ["vllm_ascend", "vllm"]\n'
        'from = { vllm = "0.11.0" }\nto = { vllm = "0.11.1", vllm_ascend = "0.14.0" }\n'
    )
    result = vam("check", "--format", "json", str(tree))
    found = {(f["old"], f["pack"], f["step"]) for f in json.loads(result.stdout)}
    # vllm stops at 0.11.1: Attention (0.12.0) is not reported.
    assert found == {
        ("vllm_ascend.distributed.utils.align_memory", "vllm_ascend", "0.14.0"),
        (VLLM_OLD, "vllm", "0.11.1"),
        (ASCEND_OLD, "vllm_ascend", "0.14.0"),
    }
    # The flag wins over the table, pack by pack.
    later = vam("check", "--format", "sarif", "--to", "vllm=0.12.0", str(tree))
    results = json.loads(later.stdout)["runs"][0]["results"]
    properties = {(r["properties"]["pack"], r["properties"]["step"]) for r in results}
    assert ("vllm", "0.12.0") in properties and ("vllm_ascend", "0.14.0") in properties


def test_pack_equals_version_is_accepted_with_one_pack_too(tree: Path) -> None:
    one = vam("check", "--rules", "vllm", "--from", "vllm=0.11.1", "--to", "0.12.0",
              str(tree / "a.py"))
    assert one.returncode == 1
    assert LATER_OLD in one.stdout and VLLM_OLD not in one.stdout


def test_a_bare_version_with_several_packs_is_a_usage_error(tree: Path) -> None:
    result = vam("migrate", *BOTH, "--to", "0.33.0", str(tree))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "vam: error: --to 0.33.0: this run has several packs (vllm_ascend, vllm), each with "
        "its own releases; name the pack: --to PACK=VERSION (repeatable), e.g. --to "
        "vllm_ascend=0.33.0 --to vllm=0.33.0"
    ]
    (tree / "pyproject.toml").write_text('[tool.vam]\nrules = ["vllm_ascend", "vllm"]\n'
                                         'from = "0.13.0"\n')
    configured = vam("check", str(tree))
    assert configured.returncode == 2
    assert ('[tool.vam] from = "0.13.0" with several packs (vllm_ascend, vllm): write from = '
            '{ vllm_ascend = "0.13.0", vllm = "0.13.0" }') in configured.stderr
    # Flags for every pack leave the bare configured version unused: no error.
    flagged = vam("check", "--from", "vllm_ascend=0.13.0", *VLLM_FROM, str(tree))
    assert flagged.returncode == 1 and VLLM_OLD in flagged.stdout, flagged.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--to", "vllm_ascnd=0.14.0"), "--to vllm_ascnd=0.14.0: no pack 'vllm_ascnd' in this run"),
        (("--to", "vllm=0.12.0", "--to", "vllm=0.13.0"), "--to: the version of vllm is given twice"),
        (("--from", "vllm=zero"), "--from vllm=zero: 'zero' is not a version"),
    ],
)
def test_versions_by_pack_are_checked(tree: Path, args: tuple[str, ...], message: str) -> None:
    result = vam("check", *BOTH, *args, str(tree))
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_overlapping_packs_are_a_usage_error(tree: Path, tmp_path: Path) -> None:
    table = tmp_path / "attention.toml"
    table.write_text(
        '[pack]\nname = "attention"\ndescription = "a fork\'s own moves"\n'
        'packages = ["vllm"]\n\n[[step]]\nversion = "1.0"\n\n'
        '[[step.module]]\nold = "vllm.attention.old"\nnew = "vllm.attention.new"\n'
    )
    result = vam("check", "--rules", f"vllm_ascend, vllm,{table}", str(tree))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "vam: error: --rules: the packs 'vllm' and 'attention' overlap (both cover "
        "'vllm'): a name must belong to one table; run them one after the other"
    ]
    into = tmp_path / "into.toml"
    into.write_text(
        '[pack]\nname = "fork"\ndescription = "moves into vLLM"\npackages = ["fork"]\n\n'
        '[[step]]\nversion = "1.0"\n\n[[step.module]]\nold = "fork.attn"\nnew = "vllm.attn"\n'
    )
    crossing = vam("check", "--rules", f"{into},vllm", str(tree))
    assert crossing.returncode == 2
    assert ("the pack 'fork' moves 'fork.attn' to 'vllm.attn' (1.0), a name of the pack "
            "'vllm'") in crossing.stderr
    twice = vam("check", "--rules", "vllm,vllm", str(tree))
    assert (twice.returncode, twice.stderr) == (
        2, "vam: error: --rules: the pack 'vllm' is given twice\n")


def test_each_packs_baseline_is_named_by_pack(tree: Path) -> None:
    (tree / "requirements.txt").write_text("vllm==0.11.1\nvllm-ascend==0.13.0\n")
    (tree / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "1"\n')
    result = vam("check", *BOTH, str(tree))
    notes = [line for line in result.stderr.splitlines() if "--from" in line]
    assert notes == ["vam: vllm_ascend: --from 0.13.0 (requirements.txt:2: vllm-ascend==0.13.0)",
                     "vam: vllm: --from 0.11.1 (requirements.txt:1: vllm==0.11.1)"]
    # Pinned at 0.11.1, vLLM's 0.11.1 names are not stale; its 0.12.0 ones are.
    assert LATER_OLD in result.stdout and f"'{VLLM_OLD}'" not in result.stdout


def test_each_packs_installed_release_is_named_by_pack_and_q_silences_it(
        tree: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """With no --from and no pin, each pack falls back to its installed distribution; the
    line a one-pack run prints is printed once per pack, with the pack's name."""
    site = tmp_path_factory.mktemp("site")
    for dist, version in (("vllm", "0.11.1"), ("vllm_ascend", "0.13.0")):
        info = site / f"{dist}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\n"
                                       f"Version: {version}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}
    one = vam("migrate", "--diff", "--rules", "vllm", str(tree), env=env)
    assert one.stderr.splitlines()[0] == "vam: --from 0.11.1 (installed vllm 0.11.1)"
    both = vam("migrate", "--diff", *BOTH, str(tree), env=env)
    assert both.stderr.splitlines()[:2] == [
        "vam: vllm_ascend: --from 0.13.0 (installed vllm-ascend 0.13.0)",
        "vam: vllm: --from 0.11.1 (installed vllm 0.11.1)"]
    quiet = vam("migrate", "--diff", "-q", *BOTH, str(tree), env=env)
    assert "--from" not in quiet.stderr, quiet.stderr


def test_explain_and_rules_show_read_every_pack() -> None:
    explained = vam("explain", *BOTH, VLLM_OLD)
    assert explained.returncode == 0 and VLLM_NEW in explained.stdout
    unknown = vam("explain", *BOTH, "vllm.nothing_here")
    assert unknown.returncode == 1
    assert "not in the vllm_ascend table or the vllm table" in unknown.stdout
    shown = vam("rules", "show", "vllm_ascend,vllm")
    assert shown.returncode == 0
    assert ASCEND_NEW in shown.stdout and VLLM_NEW in shown.stdout
    one = vam("rules", "export", "ruff", *BOTH)
    assert one.returncode == 2 and "this command reads one" in one.stderr


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ('rules = "vllm_ascend, vllm"\nfrom = { vlm = "0.11.0" }\n',
         "[tool.vam] from: no pack 'vlm' in [tool.vam] rules (packs: vllm_ascend, vllm)"),
        ("rules = []\n", "[tool.vam] rules must be a pack name or table path, or a non-empty list"),
        ('to = ["0.14.0"]\n', "[tool.vam] to must be a version"),
        ('from = "banana"\n', "pyproject.toml: [tool.vam] from: malformed version 'banana'"),
        ('rules = ["vllm"]\nto = { vllm = "1.x" }\n',
         "[tool.vam] to.vllm: malformed version '1.x'"),
    ],
)
def test_configured_packs_and_versions_are_checked(tree: Path, section: str, message: str) -> None:
    (tree / "pyproject.toml").write_text(f"[tool.vam]\n{section}")
    result = vam("check", str(tree))
    assert result.returncode == 2 and message in result.stderr, result.stderr


def _chain(**options: object) -> Chain:
    lanes = (Lane(rules.load_pack("vllm_ascend")), Lane(rules.load_pack("vllm"), "0.11.0"))
    return Chain(lanes, Options(**options))  # type: ignore[arg-type]


def test_a_later_packs_findings_name_lines_of_the_file_as_read() -> None:
    # vllm_ascend splits line 1 in two; vllm's removed name stays on line 3 of the file read.
    data = (b"from vllm_ascend.distributed.utils import align_memory, own_helper\n"
            b"x = 1\nfrom vllm.config import CompilationLevel\n")
    result = _chain().process(SourceFile(Path("m.py"), Path("."), "python"), data)
    assert result.new is not None and result.new.count(b"\n") == 4
    removed = [f for f in result.findings if f.code == "VAM003"]
    assert [(f.line, f.pack, f.old) for f in removed] == [
        (3, "vllm", "vllm.config.CompilationLevel")]


def test_a_file_that_does_not_parse_is_reported_once() -> None:
    data = b"import vllm_ascend.distributed.mooncake_connector\nimport vllm.utils\ndef (:\n"
    result = _chain(report_only=True).process(SourceFile(Path("m.py"), Path("."), "python"), data)
    assert result.failed and result.new is None
    assert [f.code for f in result.findings].count("VAM901") == 1


def test_verify_imports_suggestions_read_every_configured_pack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from migrator.verify_imports.moves import MoveTables

    (tmp_path / "fork.toml").write_text(
        '[pack]\nname = "fork"\ndescription = "a fork\'s own moves"\npackages = ["fork"]\n\n'
        '[[step]]\nversion = "1.0"\n\n[[step.module]]\nold = "fork.old"\nnew = "fork.new"\n'
    )
    monkeypatch.chdir(tmp_path)
    assert MoveTables({"fork"}, None).answer("fork.old.X", module=False) is None
    (tmp_path / "pyproject.toml").write_text('[tool.vam]\nrules = ["vllm_ascend", "fork.toml"]\n')
    answer = MoveTables({"fork", "vllm_ascend"}, None).answer("fork.old.X", module=False)
    assert answer is not None and (answer.new, answer.steps) == ("fork.new.X", ("1.0",))


def test_keep_compat_names_its_pack_when_several_run(tmp_path: Path) -> None:
    """Only the named pack's imports get two lanes; the other pack's are replaced; a bare
    version with several packs is a usage error that says how to name the pack."""
    source = tmp_path / "a.py"
    source.write_text(
        "from vllm_ascend.utils import vllm_version_is\n"
        f"import {ASCEND_OLD} as mc\n"
        f"from {VLLM_OLD.rpartition('.')[0]} import DeviceMemoryProfiler\n"
    )
    bare = vam("migrate", *BOTH, *VLLM_FROM, "--to", "vllm=0.11.1", "--keep-compat", "0.11.0",
               str(tmp_path))
    assert bare.returncode == 2 and "--keep-compat vllm=0.11.0" in bare.stderr, bare.stderr
    done = vam("migrate", *BOTH, *VLLM_FROM, "--to", "vllm=0.11.1", "--keep-compat",
               "vllm=0.11.0", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert source.read_text() == (
        "from vllm_ascend.utils import vllm_version_is\n"
        f"import {ASCEND_NEW} as mc\n"
        'if vllm_version_is("0.11.0"):\n'
        f"    from {VLLM_OLD.rpartition('.')[0]} import DeviceMemoryProfiler\n"
        "else:\n"
        f"    from {VLLM_NEW.rpartition('.')[0]} import DeviceMemoryProfiler\n"
    )
