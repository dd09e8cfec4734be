"""Installing the tool never touches the user's `vllm_ascend`; the subsystem refuses to run
beside it.

A vllm-ascend wheel is installed (`--no-deps`) into a fresh virtual environment, the files it
put there are hashed, then vam (the tool, built from this repository's root) is installed and
uninstalled: the hashes must not change. The wheel is a stand-in built here (`vllm-ascend
0.0.0+standin`: a `vllm_ascend/__init__.py` and submodules under the names this repository's
subsystem also uses), or a real one when `VAM_VLLM_ASCEND_WHEEL` names a wheel file (for
example one from `pip download --no-deps --only-binary :all: vllm-ascend`).

Offline and bounded: wheels are built with `pip wheel --no-index --no-build-isolation` by the
interpreter running the tests (its setuptools, the `test` extra), venvs are made without pip
and filled with that same pip (`pip --python`).
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.migrator.test_wheel import _snapshot

REPO = Path(__file__).resolve().parents[2]
STANDIN = "vllm-ascend stand-in wheel, built by tests/migrator/test_install_isolation.py"
STANDIN_FILES = {
    "vllm_ascend/__init__.py": f"STANDIN = {STANDIN!r}\n",
    "vllm_ascend/distributed/__init__.py": "KIND = 'stand-in distributed'\n",
    "vllm_ascend/distributed/kv_transfer/__init__.py": "KIND = 'stand-in kv_transfer'\n",
}


def _pip(*args: str | Path, python: Path | None = None, timeout: float = 300) -> str:
    target = ["--python", str(python)] if python else []
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pip", *target, *map(str, args)],
        capture_output=True, text=True, env=env, timeout=timeout, check=False,
    )
    assert done.returncode == 0, f"pip {args}: {done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def _standin_wheel(dest: Path) -> Path:
    """A minimal, valid wheel named vllm-ascend (pip installs it like any other)."""
    info = "vllm_ascend-0.0.0+standin.dist-info"
    files = dict(STANDIN_FILES)
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: vllm-ascend\nVersion: 0.0.0+standin\nSummary: {STANDIN}\n"
    )
    files[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: vam-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = "".join(
        f"{name},{_record_hash(text.encode())},{len(text.encode())}\n"
        for name, text in files.items()
    )
    files[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
    path = dest / "vllm_ascend-0.0.0+standin-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


@dataclass(frozen=True)
class Wheels:
    tool: Path
    subsystem: Path
    vllm_ascend: Path
    real: bool


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    root = tmp_path_factory.mktemp("isolation")
    source = _snapshot(root / "src")
    dist = root / "dist"
    for project in (source, source / "subsystem"):
        _pip("wheel", "--no-deps", "--no-index", "--no-build-isolation", "-q", "-w", dist, project)
    (tool,) = dist.glob("vam-*.whl")
    (subsystem,) = dist.glob("vam_kv_transfer-*.whl")
    real = os.environ.get("VAM_VLLM_ASCEND_WHEEL")
    theirs = Path(real) if real else _standin_wheel(dist)
    return Wheels(tool, subsystem, theirs, bool(real))


def _venv(where: Path) -> tuple[Path, Path]:
    """(python, site-packages) of a fresh venv without pip (filled with `pip --python`)."""
    venv.EnvBuilder(with_pip=False, clear=True).create(where)
    python = where / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    return python, Path(site)


def _owned_files(site: Path) -> dict[str, str]:
    """sha256 of every file vllm-ascend's RECORD lists, by path; a file that is gone reads
    "MISSING" (never skipped, so a deletion changes the result)."""
    (info,) = site.glob("vllm_ascend-*.dist-info")
    names = [line.split(",")[0] for line in (info / "RECORD").read_text().splitlines() if line]
    out = {}
    for name in names:
        path = site / name
        out[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "MISSING"
    return out


def _import_vllm_ascend(python: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-I", "-c", "import vllm_ascend, sys; print(vllm_ascend.__file__)"],
        capture_output=True, text=True, cwd=cwd, check=False, timeout=120,
    )


def test_the_tool_wheel_carries_no_vllm_ascend(wheels: Wheels) -> None:
    names = zipfile.ZipFile(wheels.tool).namelist()
    assert not [n for n in names if n.split("/")[0] in ("vllm_ascend", "subsystem")]
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"migrator", "rules", "shims"}
    entry_points = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheels.tool).read(entry_points[0]).decode()
    assert "vllm.general_plugins" not in text and "vam = migrator.cli:main" in text


def test_installing_and_uninstalling_the_tool_leaves_vllm_ascend_alone(
    wheels: Wheels, tmp_path: Path
) -> None:
    python, site = _venv(tmp_path / "venv")
    _pip("install", "--no-deps", "--no-index", "-q", wheels.vllm_ascend, python=python)
    before = _owned_files(site)
    assert "vllm_ascend/__init__.py" in before and "MISSING" not in before.values()

    _pip("install", "--no-deps", "--no-index", "-q", wheels.tool, python=python)
    assert (site / "migrator" / "cli").is_dir()
    assert _owned_files(site) == before

    _pip("uninstall", "-y", "-q", "vam", python=python)
    assert not (site / "migrator").exists()
    assert _owned_files(site) == before
    if not wheels.real:  # the stand-in imports without vLLM; a real vllm-ascend needs it
        proc = subprocess.run(
            [python, "-I", "-c", "import vllm_ascend; print(vllm_ascend.STANDIN)"],
            capture_output=True, text=True, cwd=tmp_path, check=False, timeout=60,
        )
        assert proc.stdout.strip() == STANDIN, proc.stderr


def test_the_subsystem_refuses_to_import_over_vllm_ascend(
    wheels: Wheels, tmp_path: Path
) -> None:
    """pip installs the subsystem's files over vllm-ascend's (a wheel cannot refuse): the
    subsystem's `__init__` then refuses to import, naming both distributions."""
    python, site = _venv(tmp_path / "venv")
    _pip("install", "--no-deps", "--no-index", "-q", wheels.vllm_ascend, python=python)
    _pip("install", "--no-deps", "--no-index", "-q", wheels.subsystem, python=python)
    proc = _import_vllm_ascend(python, tmp_path)
    assert proc.returncode == 1
    assert "ImportError: vllm_ascend at " in proc.stderr
    assert "is vam-kv-transfer" in proc.stderr and "also has vllm-ascend" in proc.stderr
    assert "one overwrote the other's files" in proc.stderr


def test_the_subsystem_imports_alone_and_refuses_to_shadow(
    wheels: Wheels, tmp_path: Path
) -> None:
    python, site = _venv(tmp_path / "venv")
    _pip("install", "--no-deps", "--no-index", "-q", wheels.subsystem, python=python)
    alone = _import_vllm_ascend(python, tmp_path)
    assert alone.returncode == 0 and alone.stdout.strip() == str(site / "vllm_ascend/__init__.py")

    # The real one in another folder on the path: the subsystem would shadow it.
    other = tmp_path / "other-site"
    _pip("install", "--no-deps", "--no-index", "-q", "--target", other, wheels.vllm_ascend)
    (site / "other.pth").write_text(f"{other}\n")
    shadow = _import_vllm_ascend(python, tmp_path)
    assert shadow.returncode == 1
    assert f"this copy shadows the real one at {other / 'vllm_ascend' / '__init__.py'}" \
        in shadow.stderr, shadow.stderr
