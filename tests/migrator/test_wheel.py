"""The built wheel works on its own: installed into a fresh virtual environment with its
runtime dependencies, away from this checkout, `vam` migrates the example project with the
rule pack that ships inside the wheel.

The wheel is built (`python -m build --wheel`, isolated build environment) from a snapshot
of the working tree in a temporary folder, so the checkout gets no `build/` folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "legacy_downstream"


def _run(command: list[str | Path], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    result = subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=900,
    )
    if check:
        assert result.returncode == 0, f"{command}: {result.stdout}\n{result.stderr}"
    return result


def _snapshot(dest: Path) -> Path:
    """The files git tracks or would track (not ignored), copied to `dest`."""
    if (REPO / ".git").exists():
        listing = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
        names = [os.fsdecode(n) for n in listing if n]
    else:  # an unpacked sdist: everything there is meant to be built
        names = [str(p.relative_to(REPO)) for p in REPO.rglob("*") if p.is_file()]
    for name in names:
        source = REPO / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel, the bin folder of a fresh venv it is installed in)."""
    root = tmp_path_factory.mktemp("wheel")
    source = _snapshot(root / "src")
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", root / "dist", source], cwd=root)
    (wheel,) = (root / "dist").glob("vam-*.whl")
    venv.EnvBuilder(with_pip=True, clear=True).create(root / "venv")
    bin_dir = root / "venv" / "bin"
    _run([bin_dir / "python", "-m", "pip", "install", "--quiet", wheel], cwd=root)
    return wheel, bin_dir


def test_wheel_ships_the_rule_pack_and_no_tests(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"rules/vllm_ascend.toml", "rules/vllm.toml"} <= names
    assert {"migrator/cli/__init__.py", "migrator/rewrite/sites/__init__.py", "migrator/__main__.py", "rules/schema.py"} <= names
    assert not any(n.startswith(("tests/", "benchmarks/", "examples/")) for n in names)
    # The subsystem is its own distribution (subsystem/): installing the tool must not write a
    # top-level vllm_ascend over the user's vllm-ascend (tests/migrator/test_install_isolation.py).
    assert not any(n.startswith(("vllm_ascend/", "subsystem/")) for n in names)


def test_installed_vam_runs_from_the_venv_not_the_checkout(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    _, bin_dir = installed
    where = _run(
        [
            bin_dir / "python",
            "-c",
            "import migrator, rules; print(migrator.__file__, rules.__file__)",
        ],
        cwd=tmp_path,
    ).stdout.split()
    site = bin_dir.parent / "lib"
    assert all(Path(w).is_relative_to(site) for w in where), where


def test_installed_vam_migrates_the_example(installed: tuple[Path, Path], tmp_path: Path) -> None:
    """The example is 0.13 code: to 0.14.0 every reference has a new home; through the whole
    table later steps move some again and report the names later releases removed."""
    _, bin_dir = installed
    shutil.copytree(EXAMPLE, tmp_path / "legacy_downstream")
    before = {p: p.read_bytes() for p in (tmp_path / "legacy_downstream").rglob("*") if p.is_file()}

    def both(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        """The installed vam's run, after checking the checkout's own vam prints the same."""
        command = ["migrate", "--diff", *args, "legacy_downstream"]
        ours = _run([bin_dir / "vam", *command], cwd=tmp_path, check=check)
        reference = _run([sys.executable, "-m", "migrator", *command], cwd=tmp_path, check=check)
        assert (ours.returncode, ours.stdout, ours.stderr) == (
            reference.returncode, reference.stdout, reference.stderr)
        return ours

    to_014 = both("--to", "0.14.0")
    for new in (
        "+from vllm_ascend.distributed.kv_transfer import register_connector",
        "+from vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector import (",
        "+from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.metadata import (",
        "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import Backend",
    ):
        assert new in to_014.stdout, to_014.stdout
    assert "--- a/legacy_downstream/ascend_plugin/connectors.py" in to_014.stdout
    assert "VAM003" not in to_014.stderr

    # The newest step the wheel's table holds (explicit, so the example's config cannot change it).
    latest = both("--to", "0.30.0rc1", check=False)
    assert latest.returncode == 1, latest.stderr  # removed names need a human
    assert ("+from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.base "
            "import Backend") in latest.stdout
    assert "cpu_offload.metadata" not in latest.stdout
    assert ("connectors.py:16:10: VAM003 'vllm_ascend.distributed.cpu_offload_connector' "
            "was removed in 0.24.0rc1") in latest.stderr
    # --diff writes nothing.
    assert {p: p.read_bytes() for p in before} == before


def test_installed_vam_lists_the_bundled_rule_pack(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    _, bin_dir = installed
    listing = _run([bin_dir / "vam", "rules", "list"], cwd=tmp_path).stdout
    assert listing.splitlines()[0::2] == [
        "vllm  steps: 0.11.1, 0.12.0, 0.13.0, 0.14.0, 0.15.0, 0.16.0, 0.17.0, 0.18.0, 0.19.0, "
        "0.20.0, 0.21.0, 0.22.0, 0.23.0, 0.24.0, 0.25.0, 0.26.0, 0.27.0, 0.28.0, 0.29.0, 0.30.0, "
        "0.31.0, 0.32.0, 0.33.0  (vllm.toml)",
        "vllm_ascend  steps: 0.7.3, 0.9.1rc2, 0.9.2rc1, 0.10.0rc1, 0.10.2rc1, 0.12.0rc1, "
        "0.13.0rc2, 0.13.0, 0.14.0, 0.18.0rc1, 0.24.0rc1, 0.25.1rc1, 0.27.1rc1, 0.28.0rc1, "
        "0.29.0rc1, 0.30.0rc1  (vllm_ascend.toml)",
    ], listing
    validate = _run([bin_dir / "vam", "rules", "validate", "vllm_ascend"], cwd=tmp_path).stdout
    assert ": ok (" in validate, validate


def test_python_dash_m_migrator_works_in_the_venv(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    _, bin_dir = installed
    help_text = _run([bin_dir / "python", "-m", "migrator", "--help"], cwd=tmp_path).stdout
    for command in ("migrate", "check", "explain", "rules"):
        assert f"  {command} " in help_text, help_text
    version = _run([bin_dir / "python", "-m", "migrator", "--version"], cwd=tmp_path).stdout
    assert version.startswith("vam, version "), version
