"""Which release the code is written for when no `--from` is given (the project's pins, the
installed release, the pack's `default-from`), names only the steps before that default know
(VAM009), and text files that pin the release they run (VAM010)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import rules
from migrator.core import findings as F
from migrator.core import pins
from migrator.core.baseline import CONFIG, INSTALLED, PACK, PINS, find_baseline
from migrator.core.config import Config
from migrator.core.discover import SourceFile, kind_of
from migrator.core.release_pins import release_pin
from migrator.core.resolver import Resolver
from migrator.core.tables import explain_name
from migrator.rewrite.engine import Engine, Options
from tests.migrator.conftest import vam

ASCEND = ("vllm-ascend",)
STORE = "vllm_ascend.distributed.mooncake.config_data"  # a 0.11 name, moved in 0.12.0rc1
P2P = "vllm_ascend.distributed.mooncake_connector"  # moved in 0.14.0
P2P_NEW = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# -- the project's pins ------------------------------------------------------------------------


def test_a_pin_in_pyproject_dependencies(tmp_path: Path) -> None:
    _write(tmp_path, "pyproject.toml", """\
        [project]
        name = "plugin"
        dependencies = ["torch>=2", "vllm-ascend==0.11.0"]
        """)
    (tmp_path / "src").mkdir()
    pin = pins.project_pin(tmp_path / "src", ASCEND)
    assert pin == pins.Pin("0.11.0", "pyproject.toml", "vllm-ascend==0.11.0")


def test_a_lower_bound_in_optional_dependencies_gives_its_version(tmp_path: Path) -> None:
    _write(tmp_path, "pyproject.toml", """\
        [project]
        name = "plugin"
        dependencies = ["torch"]
        [project.optional-dependencies]
        npu = ["vllm_ascend >=0.12.0rc1, <0.14"]
        """)
    assert pins.project_pin(tmp_path, ASCEND).version == "0.12.0rc1"  # type: ignore[union-attr]


def test_requirements_files_with_one_level_of_includes(tmp_path: Path) -> None:
    _write(tmp_path, "requirements.txt", "# runtime\n-r requirements/npu.txt\nnumpy\n")
    _write(tmp_path, "requirements/npu.txt", "torch-npu\nvllm-ascend~=0.9.1  # the 0.9 line\n")
    pin = pins.project_pin(tmp_path, ASCEND)
    assert pin == pins.Pin("0.9.1", "requirements/npu.txt:2", "vllm-ascend~=0.9.1")


def test_setup_cfg_install_requires(tmp_path: Path) -> None:
    _write(tmp_path, "setup.cfg", """\
        [options]
        install_requires =
            vllm-ascend==0.10.2rc1
        """)
    assert pins.project_pin(tmp_path, ASCEND).version == "0.10.2rc1"  # type: ignore[union-attr]


def test_a_bare_name_gives_nothing_and_the_oldest_pin_wins(tmp_path: Path) -> None:
    _write(tmp_path, "pyproject.toml", '[project]\nname = "p"\ndependencies = ["vllm-ascend"]\n')
    _write(tmp_path, "requirements-dev.txt", "vllm-ascend<0.14\nvllm-ascend==0.11.0rc1\n")
    pin = pins.project_pin(tmp_path, ASCEND)
    assert pin == pins.Pin("0.11.0rc1", "requirements-dev.txt:2", "vllm-ascend==0.11.0rc1")
    _write(tmp_path, "pyproject.toml", '[project]\nname = "p"\ndependencies = ["vllm-ascend>=0.13.0"]\n')
    # pyproject.toml is read first, but its 0.13.0 is not the oldest release the project pins.
    assert pins.project_pin(tmp_path, ASCEND) == pins.Pin(
        "0.11.0rc1", "requirements-dev.txt:2", "vllm-ascend==0.11.0rc1",
        ("pyproject.toml pins 0.13.0",))


def test_the_chain_config_then_pins_then_installed_then_pack(
    tmp_path: Path, pack: rules.Pack, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, "requirements.txt", "vllm-ascend==0.11.0\n")
    assert find_baseline("0.9.1", Config(), pack, tmp_path, None).source == "flag"
    configured = find_baseline(None, Config(from_version="0.12.0rc1"), pack, tmp_path, None)
    assert (configured.version, configured.source, configured.note) == ("0.12.0rc1", CONFIG, "")
    pinned = find_baseline(None, Config(), pack, tmp_path, None)
    assert (pinned.version, pinned.source) == ("0.11.0", PINS)
    (tmp_path / "requirements.txt").unlink()
    monkeypatch.setattr(pins.metadata, "version", lambda name: "0.10.0rc1")
    installed = find_baseline(None, Config(), pack, tmp_path, None)
    assert (installed.version, installed.source) == ("0.10.0rc1", INSTALLED)
    assert installed.note == "vam: --from 0.10.0rc1 (installed vllm-ascend 0.10.0rc1)"

    def missing(name: str) -> str:
        raise pins.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(pins.metadata, "version", missing)
    default = find_baseline(None, Config(), pack, tmp_path, None)
    assert (default.version, default.source, default.note) == ("0.13.0", PACK, "")
    # `--to` at or before the default: the user asks for the early steps themselves.
    assert find_baseline(None, Config(), pack, tmp_path, "0.13.0").version is None


def test_the_cli_says_which_pin_it_used_and_config_still_wins(tmp_path: Path) -> None:
    _write(tmp_path, "requirements.txt", "torch\nvllm-ascend==0.11.0\n")
    module = _write(tmp_path, "mod.py", f"from {STORE} import MooncakeStoreConfig\n")
    result = vam("check", "--to", "0.14.0", str(module))
    assert result.stderr.splitlines()[0] == (
        "vam: --from 0.11.0 (requirements.txt:2: vllm-ascend==0.11.0)"
    )
    assert "VAM001" in result.stdout and result.returncode == 1
    assert "vam: --from" not in vam("check", "-q", "--to", "0.14.0", str(module)).stderr
    explicit = vam("check", "--from", "0.11.0", "--to", "0.14.0", str(module))
    assert "vam: --from" not in explicit.stderr and explicit.stdout == result.stdout
    _write(tmp_path, "pyproject.toml", '[tool.vam]\nfrom = "0.13.0"\n')
    configured = vam("check", "--to", "0.14.0", str(module))
    # [tool.vam] from wins over the pin, and says nothing: the user wrote it (nor is it the
    # pack's default, under which alone the early names are reported).
    assert "vam: --from" not in configured.stderr
    assert configured.returncode == 0 and configured.stdout == ""


def test_the_oldest_pin_wins_whatever_the_file_order(tmp_path: Path) -> None:
    module = _write(tmp_path, "mod.py", f"from {STORE} import MooncakeStoreConfig\n")
    for first, second in (("0.11.0", "0.13.0"), ("0.13.0", "0.11.0")):
        _write(tmp_path, "requirements.txt", f"vllm-ascend=={first}\n")
        _write(tmp_path, "requirements-dev.txt", f"vllm-ascend=={second}\n")
        where, other = (
            ("requirements.txt", "requirements-dev.txt") if first == "0.11.0"
            else ("requirements-dev.txt", "requirements.txt")
        )
        result = vam("check", "--to", "0.14.0", str(module))
        assert result.stderr.splitlines()[0] == (
            f"vam: --from 0.11.0 ({where}:1: vllm-ascend==0.11.0; {other} pins 0.13.0)"
        )
    _write(tmp_path, "requirements.txt", "vllm-ascend==0.11.0\n")  # agreeing: no note
    pin = pins.project_pin(tmp_path, ASCEND)
    assert pin == pins.Pin("0.11.0", "requirements-dev.txt:1", "vllm-ascend==0.11.0")
    assert vam("check", "--to", "0.14.0", str(module)).stderr.splitlines()[0] == (
        "vam: --from 0.11.0 (requirements-dev.txt:1: vllm-ascend==0.11.0)")


# -- the pack's default-from ---------------------------------------------------------------------


def _table(**pack: str) -> dict[str, object]:
    return {"pack": {"name": "t", "packages": ["pkg"], **pack}, "step": [
        {"version": "1.0", "module": [{"old": "pkg.a", "new": "pkg.b"}]},
        {"version": "2.0", "module": [{"old": "pkg.c", "new": "pkg.d"}]},
    ]}


def test_default_from_is_read_and_validated() -> None:
    assert rules.parse(_table(**{"default-from": "1.0"})).default_from == "1.0"
    assert rules.parse(_table()).default_from == ""
    assert rules.load_pack("vllm_ascend").default_from == "0.13.0"
    with pytest.raises(rules.RulesError, match="malformed default-from version 'one'"):
        rules.parse(_table(**{"default-from": "one"}))
    with pytest.raises(rules.RulesError, match="default-from 2.0 is not before the last step"):
        rules.parse(_table(**{"default-from": "2.0"}))


def _engine(pack: rules.Pack, floor: str | None, **options: object) -> Engine:
    resolver = Resolver(pack, floor, "0.14.0")
    return Engine(resolver, Options(default_floor=floor, **options))  # type: ignore[arg-type]


def _process(engine: Engine, path: Path) -> tuple[bytes | None, list[F.Finding]]:
    result = engine.process(SourceFile(path, kind_of(path), path.parent))
    return result.new, sorted(result.findings, key=lambda f: (f.line, f.col))  # as the runner


def test_names_only_early_steps_know_are_reported_not_rewritten(
    pack: rules.Pack, tmp_path: Path
) -> None:
    module = _write(tmp_path, "mod.py", f"""\
        from {STORE} import MooncakeStoreConfig
        from vllm_ascend.distributed import llmdatadist_c_mgr_connector
        from {P2P} import MooncakeConnector
        """)
    new, found = _process(_engine(pack, "0.13.0"), module)
    assert [(f.line, f.code) for f in found] == [(1, F.BEFORE_BASELINE), (2, F.BEFORE_BASELINE),
                                                 (3, F.MOVED)]
    assert found[0].message == (
        f"'{STORE}' moved to 'vllm_ascend.distributed.kvpool.config_data' in 0.12.0rc1, before "
        "0.13.0, the vllm_ascend table's default baseline: left as is (for code written for an "
        "older release, run with --from 0.10.2rc1 to migrate it)"
    )
    assert "was removed in 0.12.0rc1" in found[1].message
    assert new is not None and STORE.encode() in new and P2P_NEW.encode() in new
    # Only under the default: an explicit baseline before those steps rewrites them.
    new, found = _process(_engine(pack, None), module)
    assert F.BEFORE_BASELINE not in [f.code for f in found]


def test_an_early_name_alone_is_reported_and_check_exits_0(tmp_path: Path) -> None:
    script = _write(tmp_path, "run.sh", f"export STORE={STORE}\n")
    result = vam("check", str(script))
    assert result.returncode == 0 and result.stderr.startswith("vam: 1 files scanned, 0 stale")
    assert f"{script}:1:14: VAM009 '{STORE}' moved" in result.stdout
    assert "VAM009 (info): name of a release before" in vam("rule", "VAM009").stdout


def test_explain_says_an_early_name_lies_before_the_default_baseline(pack: rules.Pack) -> None:
    lines = explain_name(pack, STORE)
    assert lines[-2] == (
        "  note: moved in 0.12.0rc1, before 0.13.0, the vllm_ascend table's default baseline: "
        "with no --from (nor [tool.vam] from, nor a pinned release) `vam migrate` and `vam "
        "check` report it (VAM009) and leave it; pass --from 0.10.2rc1 to migrate it"
    )
    removed = explain_name(pack, "vllm_ascend.distributed.kv_transfer.simple_connector")
    assert len(removed) == 2 and removed[1].startswith("  0.10.0rc1: removed (")
    assert removed[1].endswith(
        "[removed in 0.10.0rc1, before 0.13.0, the vllm_ascend table's default baseline: with no "
        "--from (nor [tool.vam] from, nor a pinned release) `vam migrate` and `vam check` report "
        "it (VAM009) and leave it; pass --from 0.9.2rc1 to have it reported as removed (VAM003)]"
    )
    assert not any("note:" in line for line in explain_name(pack, P2P))


# -- text files that pin a release ---------------------------------------------------------------


@pytest.mark.parametrize(("text", "version", "line"), [
    ("FROM quay.io/ascend/vllm-ascend:v0.12.0rc1\n", "0.12.0rc1", 1),
    ("kind: Pod\n  image: registry.example.com/vllm-ascend:v0.11.0rc0-a3\n", "0.11.0rc0", 2),
    ("RUN pip install vllm-ascend==0.11.0 mooncake\n", "0.11.0", 1),
    ("numpy\nvllm_ascend==0.9.1\n", "0.9.1", 2),
    ('pip install "vllm-ascend[mooncake] == 0.13.0"\n', "0.13.0", 1),
    ("vllm-ascend==0.14.0\nFROM vllm-ascend:v0.12.0rc1\n", "0.12.0rc1", 2),  # the oldest
    ('  image: "vllm-ascend:v0.11.0"\n', "0.11.0", 1),
    ("# serve 0.11.0\nvllm-ascend==0.11.0  # pinned\n", "0.11.0", 2),  # a pin before a comment
    ("pip install git+https://h/r.git#egg=x vllm-ascend==0.12.0\n", "0.12.0", 1),
])
def test_release_pin_forms(text: str, version: str, line: int) -> None:
    pin = release_pin(text, ASCEND)
    assert pin is not None and (pin.version, pin.line) == (version, line)


@pytest.mark.parametrize("text", [
    "vllm-ascend>=0.11.0\n", "vllm-ascend==0.11.*\n", "image: vllm-ascend:latest\n",
    "myvllm-ascend==1.0\n", "import vllm_ascend.distributed\n",
    # Prose naming a tag (vllm-ascend's own tutorials) is no image the file pulls.
    "The model is first supported in `vllm-ascend:v0.9.1rc3`\n",
    # A comment runs nothing: prose, or a requirement the file no longer installs.
    "# upgrade from vllm-ascend==0.11.0 to latest\n", "  # vllm-ascend==0.11.0\n",
    "numpy  # was vllm_ascend==0.9.1\n", "# FROM quay.io/ascend/vllm-ascend:v0.11.0\n",
])
def test_not_a_release_pin(text: str) -> None:
    assert release_pin(text, ASCEND) is None


MANIFEST = f"""\
spec:
  image: quay.io/ascend/vllm-ascend:v0.12.0rc1
  args: '{{"kv_connector_module_path": "{P2P}"}}'
"""


def test_a_file_pinning_an_older_release_keeps_its_paths(pack: rules.Pack, tmp_path: Path) -> None:
    manifest = _write(tmp_path, "deploy.yaml", MANIFEST)
    new, found = _process(_engine(pack, "0.13.0"), manifest)
    assert new is None
    assert [(f.line, f.code) for f in found] == [(3, F.HELD_BY_PIN)]
    assert found[0].message == (
        f"'{P2P}' kept: vllm-ascend 0.12.0rc1, pinned at line 2, does not have '{P2P_NEW}' "
        "(moved in 0.14.0); --ignore-release-pins rewrites it"
    )
    new, found = _process(_engine(pack, "0.13.0", release_pins=False), manifest)
    assert new is not None and P2P_NEW.encode() in new and found[0].code == F.MOVED


def test_a_file_pinning_a_later_release_gets_the_steps_up_to_it(
    pack: rules.Pack, tmp_path: Path
) -> None:
    script = _write(tmp_path, "serve.sh", """\
        pip install vllm-ascend==0.14.0
        python -m app --store vllm_ascend.distributed.kvpool.config_data
        """)
    engine = Engine(Resolver(pack, "0.13.0"), Options(default_floor="0.13.0"))
    new, found = _process(engine, script)
    store = "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store"
    assert new is not None and f"--store {store}.config_data\n".encode() in new
    assert [f.code for f in found] == [F.MOVED, F.HELD_BY_PIN]
    assert found[1].message == (
        f"'{store}.config_data' kept: vllm-ascend 0.14.0, pinned at line 1, does not have "
        f"'{store}.metadata' (moved in 0.27.1rc1); --ignore-release-pins rewrites it"
    )


def test_the_cli_holds_a_pinned_file_and_the_option_rewrites_it(tmp_path: Path) -> None:
    manifest = _write(tmp_path, "deploy.yaml", MANIFEST)
    held = vam("migrate", "--to", "0.14.0", str(manifest))
    assert held.returncode == 0 and manifest.read_text() == MANIFEST
    assert f"{manifest}:3:40: VAM010 '{P2P}' kept" in held.stderr
    assert "--ignore-release-pins" in vam("migrate", "--help").stdout
    done = vam("migrate", "--to", "0.14.0", "--ignore-release-pins", str(manifest))
    assert done.returncode == 0 and P2P_NEW in manifest.read_text()


def test_a_path_a_later_step_recreated_is_no_early_name(tmp_path: Path) -> None:
    """With no --to, the names every later step wrote still mark code of their era."""
    table = rules.parse({"pack": {"name": "t", "packages": ["pkg"], "default-from": "1.0"},
                         "step": [
        {"version": "1.0", "module": [{"old": "pkg.a", "new": "pkg.x"}]},
        {"version": "2.0", "module": [{"old": "pkg.m", "new": "pkg.a.b"}]},
    ]})
    script = _write(tmp_path, "run.sh", "echo pkg.a.b pkg.a.c\n")
    engine = Engine(Resolver(table, "1.0"), Options(default_floor="1.0"))
    _, found = _process(engine, script)
    assert [(f.code, f.old) for f in found] == [(F.BEFORE_BASELINE, "pkg.a.c")]


def test_a_pin_named_in_a_comment_holds_nothing_back(pack: rules.Pack, tmp_path: Path) -> None:
    manifest = _write(tmp_path, "deploy.yaml", "# upgrade from vllm-ascend==0.11.0 to latest\n"
                      + MANIFEST.replace("image: quay.io/ascend/vllm-ascend:v0.12.0rc1", "x: 1"))
    new, found = _process(_engine(pack, "0.13.0"), manifest)
    assert new is not None and P2P_NEW.encode() in new
    assert [f.code for f in found] == [F.MOVED]


def test_a_file_pinning_the_baseline_is_rewritten_and_its_pin_reported(
    pack: rules.Pack, tmp_path: Path
) -> None:
    manifest = _write(tmp_path, "deploy.yaml", MANIFEST.replace("v0.12.0rc1", "v0.13.0-a3"))
    new, found = _process(_engine(pack, "0.13.0"), manifest)
    assert new is not None and P2P_NEW.encode() in new and b"vllm-ascend:v0.13.0-a3" in new
    assert [(f.line, f.code) for f in found] == [(2, F.PIN_LEFT_BEHIND), (3, F.MOVED)]
    assert found[0].message == (
        "this file pins vllm-ascend 0.13.0 (line 2), which does not have the rewritten paths: "
        "move the pin to 0.14.0 or later"
    )
    # Nothing rewritten, nothing to say about the pin.
    done = _write(tmp_path, "done.yaml", "image: quay.io/ascend/vllm-ascend:v0.13.0\n")
    assert _process(_engine(pack, "0.13.0"), done) == (None, [])


def test_the_cli_reports_a_dockerfile_pinning_the_from_release(tmp_path: Path) -> None:
    dockerfile = _write(tmp_path, "Dockerfile", f"""\
        FROM quay.io/ascend/vllm-ascend:v0.11.0
        ENV KV_CONNECTOR={P2P}
        """)
    result = vam("migrate", "--from", "0.11.0", "--to", "0.14.0", str(dockerfile))
    assert result.returncode == 0, result.stderr
    assert "FROM quay.io/ascend/vllm-ascend:v0.11.0\n" in dockerfile.read_text()
    assert P2P_NEW in dockerfile.read_text()
    assert f"{dockerfile}:1:1: VAM012 this file pins vllm-ascend 0.11.0 (line 1)," in result.stderr
    assert "move the pin to 0.14.0 or later" in result.stderr
