"""`vam shims check`: fixture tables and packages, good and broken, and the bundled table."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from shims_helpers import REPO, Tree, bundled_014, old_paths

import rules
from migrator.cli import main

ACME_OLDS = [
    "acme.oldpkg",
    "acme.oldpkg.sub",
    "acme.oldpkg.deep",
    "acme.oldpkg.deep.leaf",
    "acme.flat",
    "acme.core.interim",
    "acme.utils.moved",
    "acme.utils.renamed_old",
    "acme.hook",
]


def vam(*args: str, cwd: Path) -> Result:
    """Run `vam ARGS` in-process from `cwd` (not the repository, whose `vllm_ascend` would
    otherwise come first on each probe's sys.path)."""
    before = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(before)


def rows(output: str) -> dict[str, list[str]]:
    """{old: [new, imports, warns once, same object, status]} from the table."""
    found = {}
    for line in output.splitlines():
        cells = line.split(None, 5)
        if len(cells) == 6 and "." in cells[0] and not cells[0].endswith(":"):
            found[cells[0]] = cells[1:]
    return found


def test_fixture_package_passes(acme: Tree, tmp_path: Path) -> None:
    result = vam(
        "shims", "check", "--rules", str(acme.root / "acme/rules.toml"),
        "--package-path", str(acme.root), cwd=tmp_path,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "step 2.0, old paths served until 3.0: applies: every target is installed"
    assert lines[1].split() == [
        "old",
        "new",
        "imports",
        "warns",
        "once",
        "same",
        "object",
        "status",
    ]
    assert set(lines[2]) <= {"-", " "}
    table = rows(result.output)
    assert list(table) == ACME_OLDS
    assert all(cells[1:] == ["yes", "yes", "yes", "ok"] for cells in table.values()), table
    assert table["acme.oldpkg.deep.leaf"][0] == "acme.core.newpkg.deep.leaf"
    assert lines[-1] == "9 old names: 9 ok, 0 skipped, 0 failed"
    # Columns are aligned: every status starts at the same offset.
    offsets = {
        line.rindex(cells[-1])
        for line, cells in zip(lines[3 : 3 + len(table)], table.values(), strict=True)
    }
    assert len(offsets) == 1


def test_missing_first_party_module_fails(acme: Tree, tmp_path: Path) -> None:
    (acme.root / "acme/core/flat_impl.py").unlink()
    result = vam(
        "shims", "check", "--rules", str(acme.root / "acme/rules.toml"),
        "--package-path", str(acme.root), cwd=tmp_path,
    )  # fmt: skip
    assert result.exit_code == 1
    assert rows(result.output)["acme.flat"][1:] == ["no", "-", "-", "FAIL"]
    assert (
        "acme.flat: FAIL: target acme.core.flat_impl is not installed, though the step's "
        "other targets are" in result.output
    )
    assert result.output.splitlines()[-1] == "9 old names: 8 ok, 0 skipped, 1 failed"


def test_missing_third_party_module_is_skipped(acme: Tree, tmp_path: Path) -> None:
    acme.write({"acme/core/flat_impl.py": "import torch_npu_not_installed_here\n"})
    result = vam(
        "shims", "check", "--rules", str(acme.root / "acme/rules.toml"),
        "--package-path", str(acme.root), cwd=tmp_path,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert rows(result.output)["acme.flat"] == [
        "acme.core.flat_impl", "-", "-", "-", "skipped (missing torch_npu_not_installed_here)"
    ]  # fmt: skip
    assert result.output.splitlines()[-1] == "9 old names: 8 ok, 1 skipped, 0 failed"


def test_hand_written_reexport_module_fails(acme: Tree, tmp_path: Path) -> None:
    """The naive shim (a module at the old path that star-imports the new one) imports but
    neither warns nor is the same module: both columns say so."""
    acme.write(
        {
            "acme/__init__.py": "",
            "acme/flat.py": "from acme.core.flat_impl import *  # noqa\n",
        }
    )
    result = vam(
        "shims", "check", "--rules", str(acme.root / "acme/rules.toml"),
        "--package-path", str(acme.root), cwd=tmp_path,
    )  # fmt: skip
    assert result.exit_code == 1
    table = rows(result.output)
    assert table["acme.flat"][1:] == ["yes", "no", "no", "FAIL"]
    assert "acme.flat: FAIL: acme.flat is not acme.core.flat_impl; 0 warnings for" in result.output
    assert table["acme.oldpkg"][1:] == ["no", "-", "-", "FAIL"]


def test_a_hanging_import_times_out(acme: Tree, tmp_path: Path) -> None:
    acme.write({"acme/core/flat_impl.py": "import time\ntime.sleep(30)\n"})
    result = vam(
        "shims", "check", "--rules", str(acme.root / "acme/rules.toml"),
        "--package-path", str(acme.root), "--timeout", "2", cwd=tmp_path,
    )  # fmt: skip
    assert result.exit_code == 1
    assert rows(result.output)["acme.flat"][-1] == "timeout"
    assert "acme.flat: timeout: no answer in 2 s" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rules", "no_such_pack"], "vam: error: unknown rule pack 'no_such_pack'"),
        (["--package-path", "/no/such/dir"], "vam: error: --package-path: no such directory"),
        (["--timeout", "0"], "vam: error: --timeout must be a positive number of seconds"),
    ],
)
def test_usage_errors_exit_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = vam("shims", "check", *args, cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(message)


def test_bundled_table_passes_on_the_generated_layout(
    va_layout: tuple[Tree, rules.Pack], tmp_path: Path
) -> None:
    """Every old path of the vllm_ascend pack, with the repository's real
    `vllm_ascend/distributed/__init__.py` installing the shims over generated modules."""
    tree, pack = va_layout
    result = vam("shims", "check", "--package-path", str(tree.root), cwd=tmp_path)
    assert result.exit_code == 0, result.output
    table = rows(result.output)
    assert list(table) == [p.old for p in old_paths(pack)]
    assert {cells[-1] for cells in table.values()} == {"ok"}


def test_bundled_table_passes_on_the_real_subsystem(tmp_path: Path) -> None:
    pack = bundled_014()
    missing = []
    for path in old_paths(pack):
        module = path.new if path.kind == "module" else path.new.rpartition(".")[0]
        base = REPO.joinpath("subsystem", *module.split("."))
        if not (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()):
            missing.append(module)
    if missing:
        pytest.skip(f"the real subsystem lacks {len(missing)} new modules, e.g. {missing[0]}")
    result = vam("shims", "check", "--timeout", "300", cwd=tmp_path)
    assert result.exit_code == 0, result.output


def test_package_not_importable_is_one_line_exit_2(tmp_path: Path) -> None:
    """issue 19: with the table's package not importable there is nothing to probe: one line
    naming it, exit 2 (a setup problem, as ruff/pre-commit use 2), not a FAIL per module.

    The interpreter runs isolated (-I) and without `site` (-S, so no editable-install finder
    supplies `vllm_ascend`); the tool and its dependencies come from plain sys.path entries."""
    import site
    import subprocess
    import sys

    site_dirs = [p for p in site.getsitepackages() if p.endswith("site-packages")]
    boot = (f"import sys; sys.path[:0] = [{str(REPO)!r}]; sys.path += {site_dirs!r}; "
            "from migrator.cli import main; main()")
    result = subprocess.run([sys.executable, "-I", "-S", "-c", boot, "shims", "check"],
                            cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "vam: error: vllm_ascend, the package the table moves, is not importable in this "
        "environment: nothing to check (install it, or pass --package-path DIR)"
    ]


def _with_heavy_dependency(acme: Tree, body: str) -> None:
    """acme imports a third-party module `heavydep` (as vllm_ascend imports vLLM and torch)
    that logs each import of itself."""
    init = (acme.root / "acme/__init__.py").read_text()
    acme.write({"heavydep.py": body, "acme/__init__.py": "import heavydep  # noqa\n" + init})


def test_probes_import_third_party_modules_once_per_worker(
    acme: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 19: `vam shims check` timed out on a loaded 2-core machine, each probe importing
    vLLM and torch again. A third-party module is imported by the first probe and by the
    interpreter the later probes are forked from, never again; each probe still passes."""
    log = tmp_path / "imports.log"
    monkeypatch.setenv("HEAVYDEP_LOG", str(log))
    _with_heavy_dependency(acme, "import os\nopen(os.environ['HEAVYDEP_LOG'], 'a').write('x')\n")
    result = vam(
        "shims", "check", "--rules", str(acme.root / "acme/rules.toml"),
        "--package-path", str(acme.root), "--jobs", "1", cwd=tmp_path,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "9 old names: 9 ok, 0 skipped, 0 failed"
    assert log.read_text() == "xx"  # the first probe, then the warm interpreter: not 9 times


def test_a_third_party_module_that_imports_first_party_code_gets_fresh_probes(
    acme: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Warming up must not import a first-party module (the probes must find it unimported):
    where a third-party module pulls one in, every later probe runs in a fresh interpreter."""
    log = tmp_path / "imports.log"
    monkeypatch.setenv("HEAVYDEP_LOG", str(log))
    _with_heavy_dependency(
        acme, "import os\nopen(os.environ['HEAVYDEP_LOG'], 'a').write('x')\nimport acme.utils\n"
    )
    result = vam(
        "shims", "check", "--rules", str(acme.root / "acme/rules.toml"),
        "--package-path", str(acme.root), "--jobs", "1", cwd=tmp_path,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "9 old names: 9 ok, 0 skipped, 0 failed"
    assert log.read_text() == "x" * 10  # the first probe, the warm-up, then 8 fresh probes
