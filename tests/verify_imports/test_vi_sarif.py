"""`vam verify-imports --format sarif`: SARIF 2.1.0 from the renderer `vam check` uses."""

from __future__ import annotations

import json

from click.testing import CliRunner

from migrator.cli import main
from migrator.verify_imports import CODE_TITLES


def test_sarif_format_is_sarif_2_1_0(tree) -> None:
    tree({
        "pkg/__init__.py": "",
        "pkg/kv/__init__.py": "",
        "pkg/kv/impl.py": "class Connector: ...\n",
        "pkg/lazy.py": "def __getattr__(name): ...\n",
        "pkg/user.py": "from pkg.kv import Connector\nfrom pkg.lazy import thing\n",
        "pkg/x #1.py": "from pkg import nothing\n",
    })
    result = CliRunner().invoke(main, ["verify-imports", "--format", "sarif", "pkg"])
    assert result.exit_code == 1
    sarif = json.loads(result.stdout)
    assert sarif["version"] == "2.1.0"
    assert sarif["$schema"].endswith("sarif-2.1.0.json")
    (run,) = sarif["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "vam" and driver["version"]
    rules = driver["rules"]
    assert [r["id"] for r in rules] == sorted(CODE_TITLES)
    assert all(r["shortDescription"]["text"] == CODE_TITLES[r["id"]] for r in rules)
    found = {(r["ruleId"], r["level"]) for r in run["results"]}
    assert found == {("VAI001", "error"), ("VAI100", "warning")}
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        assert res["message"]["text"]
        (location,) = res["locations"]
        region = location["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
    uris = sorted(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                  for r in run["results"])
    assert uris == ["pkg/user.py", "pkg/user.py", "pkg/x%20%231.py"]
