"""Each kind of finding, on small synthetic releases."""

from __future__ import annotations

from pathlib import Path

from tests.infer.helpers import FUNCTION as BIG
from tests.infer.helpers import infer, pairs, release, table

OTHER = """
class {name}:
    def run(self, value):
        return [value] * 3
"""


def test_module_move_by_definitions(tmp_path: Path) -> None:
    old = release(tmp_path / "old", {"pkg/__init__.py": "", "pkg/conn.py": BIG.format(name="f")})
    new = release(
        tmp_path / "new",
        {"pkg/__init__.py": "", "pkg/io/__init__.py": "", "pkg/io/link.py": BIG.format(name="f")},
        "2.0",
    )
    data = table(infer(old, new))
    assert pairs(data, "module") == {("pkg.conn", "pkg.io.link")}
    assert data["step"][0]["version"] == "2.0"


def test_package_collapses_into_one_rule_with_submodules(tmp_path: Path) -> None:
    files = {"a.py": BIG.format(name="fa"), "b/__init__.py": "", "b/c.py": OTHER.format(name="C")}
    old = release(
        tmp_path / "old",
        {
            "pkg/__init__.py": "",
            "pkg/pool/__init__.py": "",
            **{f"pkg/pool/{k}": v for k, v in files.items()},
        },
    )
    new = release(
        tmp_path / "new",
        {
            "pkg/__init__.py": "",
            "pkg/kv/__init__.py": "",
            "pkg/kv/store/__init__.py": "",
            **{f"pkg/kv/store/{k}": v for k, v in files.items()},
        },
    )
    data = table(infer(old, new))
    assert data["step"][0]["module"] == [
        {"old": "pkg.pool", "new": "pkg.kv.store", "submodules": ["a", "b", "b.c"]}
    ]


def test_symbol_move_by_name_leaves_the_module_in_place(tmp_path: Path) -> None:
    old = release(
        tmp_path / "old", {"pkg/__init__.py": "", "pkg/utils.py": BIG.format(name="f") + "X = 1\n"}
    )
    new = release(
        tmp_path / "new",
        {
            "pkg/__init__.py": "",
            "pkg/utils.py": "X = 1\n",
            "pkg/kv.py": BIG.format(name="f").replace("0", "4"),
        },
    )
    data = table(infer(old, new))
    assert pairs(data, "symbol") == {("pkg.utils.f", "pkg.kv.f")}
    assert pairs(data, "module") == set()


def test_symbol_move_by_identical_body_is_a_rename(tmp_path: Path) -> None:
    old = release(
        tmp_path / "old", {"pkg/__init__.py": "", "pkg/utils.py": BIG.format(name="f") + "X = 1\n"}
    )
    new = release(
        tmp_path / "new",
        {"pkg/__init__.py": "", "pkg/utils.py": "X = 1\n", "pkg/kv.py": BIG.format(name="g")},
    )
    result = infer(old, new)
    assert pairs(table(result), "symbol") == {("pkg.utils.f", "pkg.kv.g")}
    assert "identical body" in result.stdout


def test_rename_in_place_by_similarity(tmp_path: Path) -> None:
    edited = BIG.format(name="total_size").replace("total -= 1", "total -= 2")
    old = release(
        tmp_path / "old",
        {"pkg/__init__.py": "", "pkg/m.py": BIG.format(name="size") + OTHER.format(name="K")},
    )
    new = release(
        tmp_path / "new", {"pkg/__init__.py": "", "pkg/m.py": edited + OTHER.format(name="K")}
    )
    result = infer(old, new)
    assert pairs(table(result), "symbol") == {("pkg.m.size", "pkg.m.total_size")}
    assert "body similarity" in result.stdout


def test_two_modules_merged_into_one(tmp_path: Path) -> None:
    old = release(
        tmp_path / "old",
        {
            "pkg/__init__.py": "",
            "pkg/a.py": BIG.format(name="fa"),
            "pkg/b.py": OTHER.format(name="B"),
        },
    )
    new = release(
        tmp_path / "new",
        {"pkg/__init__.py": "", "pkg/ab.py": BIG.format(name="fa") + OTHER.format(name="B")},
    )
    result = infer(old, new)
    assert pairs(table(result), "module") == {("pkg.a", "pkg.ab"), ("pkg.b", "pkg.ab")}
    assert "merged with pkg.b" in result.stdout


def test_removals_carry_what_vanished(tmp_path: Path) -> None:
    old = release(
        tmp_path / "old",
        {
            "pkg/__init__.py": "",
            "pkg/gone.py": BIG.format(name="lost"),
            "pkg/m.py": "def helper(a, b):\n    return a\nY = 2\n",
        },
    )
    new = release(tmp_path / "new", {"pkg/__init__.py": "", "pkg/m.py": "Y = 2\n"})
    removed = {e["old"]: e["hint"] for e in table(infer(old, new))["step"][0]["removed"]}
    assert removed == {
        "pkg.gone": "module removed in this release (it defined lost)",
        "pkg.m.helper": "`def helper(a, b)` was removed in this release",
    }


def test_a_reexport_counts_as_still_present(tmp_path: Path) -> None:
    old = release(tmp_path / "old", {"pkg/__init__.py": "", "pkg/utils.py": BIG.format(name="f")})
    new = release(
        tmp_path / "new",
        {
            "pkg/__init__.py": "",
            "pkg/utils.py": "from pkg.kv import f\n",
            "pkg/kv.py": BIG.format(name="f"),
        },
    )
    data = table(infer(old, new))
    assert "symbol" not in data["step"][0] and "removed" not in data["step"][0]


def test_ambiguous_target_is_commented_out_with_candidates(tmp_path: Path) -> None:
    old = release(
        tmp_path / "old", {"pkg/__init__.py": "", "pkg/utils.py": BIG.format(name="f") + "X = 1\n"}
    )
    new = release(
        tmp_path / "new",
        {
            "pkg/__init__.py": "",
            "pkg/utils.py": "X = 1\n",
            "pkg/a.py": BIG.format(name="f").replace("0", "5"),
            "pkg/b.py": BIG.format(name="f").replace("1", "7"),
        },
    )
    result = infer(old, new)
    assert "symbol" not in table(result)["step"][0]
    assert "# NOT APPLIED" not in result.stdout  # the marker is on the evidence line
    assert "NOT APPLIED (ambiguous target)" in result.stdout
    assert '# old = "pkg.utils.f"' in result.stdout
    assert "# candidates: pkg.a.f, pkg.b.f" in result.stdout


def test_under_keeps_only_moves_touching_the_scope(tmp_path: Path) -> None:
    old = release(
        tmp_path / "old",
        {
            "pkg/__init__.py": "",
            "pkg/d/__init__.py": "",
            "pkg/d/x.py": BIG.format(name="fx"),
            "pkg/y.py": OTHER.format(name="Y"),
        },
    )
    new = release(
        tmp_path / "new",
        {
            "pkg/__init__.py": "",
            "pkg/d/__init__.py": "",
            "pkg/d/sub/__init__.py": "",
            "pkg/d/sub/x.py": BIG.format(name="fx"),
            "pkg/z.py": OTHER.format(name="Y"),
        },
    )
    everything = pairs(table(infer(old, new)), "module")
    assert everything == {("pkg.d.x", "pkg.d.sub.x"), ("pkg.y", "pkg.z")}
    scoped = pairs(table(infer(old, new, "--under", "pkg.d", "--package", "pkg")), "module")
    assert scoped == {("pkg.d.x", "pkg.d.sub.x")}


def test_a_name_defined_everywhere_is_no_evidence_of_a_move(tmp_path: Path) -> None:
    logger = "logger = get_logger(__name__)\n"
    others = {f"pkg/m{i}.py": logger for i in range(5)}
    old = release(
        tmp_path / "old", {"pkg/__init__.py": "", "pkg/c.py": logger + "Y = 1\n", **others}
    )
    new = release(tmp_path / "new", {"pkg/__init__.py": "", "pkg/c.py": "Y = 1\n", **others})
    step = table(infer(old, new))["step"][0]
    assert "symbol" not in step
    assert step["removed"] == [
        {
            "old": "pkg.c.logger",
            "hint": "`logger = get_logger(__name__)` was removed in this release; a `logger` is "
            "still defined in pkg.m0, pkg.m1, pkg.m2, pkg.m3 (+1 more)",
        }
    ]
