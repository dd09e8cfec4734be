"""Many references on one line cost time linear in the line: no per-reference look back to
the line's start, no per-site copy of the line. Asserted by counting the characters the
work touches (a structural measure, never a timing)."""

from __future__ import annotations

import re
from typing import Any

import pytest

import rules
from migrator.core.resolver import Resolver
from migrator.rewrite import locator
from migrator.rewrite import text as T
from migrator.rewrite.engine import Engine, Options
from migrator.rewrite.textfile import rewrite_text

PACK = rules.load_pack("vllm_ascend")
OLD = "vllm_ascend.distributed.mooncake_connector"
NEW = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"
N = 2000


class _Counting(str):
    """A text that counts the characters its searches and slices cover."""

    touched = 0

    def rfind(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        lo = max(start or 0, 0)
        hi = len(self) if end is None else min(end, len(self))
        _Counting.touched += max(hi - lo, 0)
        return super().rfind(sub, lo, hi)

    def __getitem__(self, key: Any) -> str:  # type: ignore[override]
        out = super().__getitem__(key)
        _Counting.touched += len(out)
        return out


class _CountingPattern:
    """A compiled pattern that counts the span each search is given."""

    def __init__(self, pattern: re.Pattern[str]):
        self.pattern = pattern

    def finditer(self, text: str, pos: int = 0, endpos: int = 1 << 62) -> Any:
        _Counting.touched += max(min(endpos, len(text)) - pos, 0)
        return self.pattern.finditer(text, pos, endpos)

    def match(self, text: str, pos: int = 0, endpos: int = 1 << 62) -> Any:
        _Counting.touched += max(min(endpos, len(text)) - pos, 0)
        return self.pattern.match(text, pos, endpos)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> None:
    _Counting.touched = 0
    for name in ("_URL_BREAK", "_LINK_AT_REF"):
        if hasattr(T, name):
            monkeypatch.setattr(T, name, _CountingPattern(getattr(T, name)))


@pytest.mark.parametrize("lead", ["k: ", "see https://example.com/docs "])
def test_references_on_one_long_line_are_found_in_linear_work(counted: None, lead: str) -> None:
    line = lead + " ".join(f"{OLD}.X{i}" for i in range(N)) + "\n"
    text = _Counting("header\n" + line)
    edits = list(T.find_references(text, Resolver(PACK)))
    assert [e.old for e in edits] == [f"{OLD}.X{i}" for i in range(N)]
    # Looking back to the line's start for each reference touched ~N * len / 2 characters.
    assert _Counting.touched <= 4 * len(text), _Counting.touched


def test_links_pinned_on_one_long_line_are_all_kept() -> None:
    link = f"https://github.com/vllm-project/vllm-ascend/blob/v0.13.0/{OLD.replace('.', '/')}.py"
    moving = link.replace("/v0.13.0/", "/main/")
    line = " ".join([link, moving] * 300) + "\n"
    new, findings = rewrite_text(line, Resolver(PACK))
    assert new == " ".join([link, moving.replace(OLD.replace(".", "/"), NEW.replace(".", "/"))]
                           * 300) + "\n"
    assert sum("pinned to v0.13.0" in f.message for f in findings) == 300


@pytest.mark.parametrize("wide", ["", "中"])
def test_sites_on_one_long_line_are_located_without_copying_it(
        monkeypatch: pytest.MonkeyPatch, wide: str) -> None:
    copies: list[int] = []
    line_of = locator.SourceMap.line

    def line(self: locator.SourceMap, number: int) -> str:
        copies.append(number)
        return line_of(self, number)

    monkeypatch.setattr(locator.SourceMap, "line", line)
    n = 400
    source = "import os\n__all__ = [" + ", ".join(
        f'"{wide}{OLD}.X{i}"' for i in range(n)) + "]\nx = 1\n"
    new, findings = Engine(Resolver(PACK), Options()).transform_python(source, None)
    assert new == source.replace(OLD, NEW)
    assert len(findings) == n
    # Each site's ast position was converted by copying its line: 2 * n copies.
    assert len(copies) <= 4, len(copies)
