"""Several move tables in one pass over a file: one `Engine` per pack ("lane"), applied in
turn, the output of one the input of the next.

A run of `--rules vllm_ascend,vllm` reads each file once and writes it once: the first
lane's new bytes are what the second lane reads, the findings of both are one list, and the
diff is from the file as read to what the last lane left. The packs' packages never overlap
and no pack moves a name into another's (`migrator.cli.packs` refuses such a run), so no
lane rewrites what another wrote, and the order of the lanes does not change the result.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from migrator.core.discover import SourceFile
from migrator.core.resolver import Resolver
from migrator.core.settings import Options
from migrator.rewrite.engine import Engine, FileResult, Read, read
from rules import Pack


@dataclass(frozen=True)
class Lane:
    """One pack of a run and its window: the steps after `from_version` up to `to_version`
    (None: open). `default_floor`, the pack's `default-from` when that is the lane's
    baseline, has the names only the steps up to it know reported (VAM009), not rewritten."""

    pack: Pack
    from_version: str | None = None
    to_version: str | None = None
    default_floor: str | None = None
    # `--keep-compat` for this pack (None: its imports are replaced, not written in two lanes).
    keep_compat: str | None = None


class Chain:
    """The engines of a run's lanes, with `Engine`'s `screen`/`process` interface.

    With one lane it is that lane's engine (large text files streamed when `stream`); with
    several, files are read whole, as each lane reads what the one before wrote.
    """

    def __init__(self, lanes: Sequence[Lane], options: Options, *, stream: bool = False):
        if not lanes:
            raise ValueError("a run needs at least one pack")
        self.engines = tuple(
            Engine(
                Resolver(lane.pack, lane.from_version, lane.to_version),
                replace(options, default_floor=lane.default_floor,
                        keep_compat=_kept(lane, options, len(lanes))),
                stream=stream and len(lanes) == 1,
            )
            for lane in lanes
        )
        self.names = tuple(lane.pack.name for lane in lanes)

    def screen(self, source: SourceFile) -> Read | None:
        """As `Engine.screen`: the bytes when any lane's byte tests pass them."""
        if len(self.engines) == 1:
            return self.engines[0].screen(source)
        data = read(source)
        if isinstance(data, OSError) or any(e.may_refer(source, data) for e in self.engines):
            return data
        return None

    def process(
        self, source: SourceFile, data: Read | None = None, screened: bool = False
    ) -> FileResult:
        """As `Engine.process`, through every lane in order; each finding that a step of a
        table gave names its pack."""
        if len(self.engines) == 1:
            return _tagged(self.engines[0].process(source, data, screened), self.names[0])
        if data is None:
            data = read(source)
        if not isinstance(data, bytes):  # unreadable: the same failure from every lane
            return self.engines[0].process(source, data, screened)
        results = []
        current = data
        for engine, name in zip(self.engines, self.names, strict=True):
            # Each lane makes its own byte tests: `screened` says only that one lane passed.
            result = _tagged(engine.process(source, current, screened=False), name)
            if current is not data and result.findings:
                lines = line_map(data, current)
                result.findings = [replace(f, line=lines(f.line)) for f in result.findings]
            results.append(result)
            if result.new is not None and not result.failed:
                current = result.new
        return _merged(source, data, current, results)


def _tagged(result: FileResult, pack: str) -> FileResult:
    result.findings = [replace(f, pack=pack) if f.step else f for f in result.findings]
    return result


def _merged(
    source: SourceFile, data: bytes, current: bytes, results: list[FileResult]
) -> FileResult:
    """One result for the lanes' `results`: failed if any lane failed (the file is then left
    as it was), each finding once (a file that does not parse fails in every lane)."""
    merged = FileResult(str(source.path))
    merged.failed = any(r.failed for r in results)
    merged.parsed = any(r.parsed for r in results)
    merged.encoding = next((r.encoding for r in results if r.encoding != "utf-8"), "utf-8")
    seen: set[tuple[int, int, str, str]] = set()
    for result in results:
        for finding in result.findings:
            key = (finding.line, finding.col, finding.code, finding.message)
            if key not in seen:
                seen.add(key)
                merged.findings.append(finding)
    if not merged.failed and current != data:
        merged.new = current
    return merged


def line_map(old: bytes, new: bytes) -> Callable[[int], int]:
    """Line numbers of `new` (1-based; 0 for none) to those of `old`: a lane after one that
    split an import reports where the file as read has the line."""
    before, after = old.split(b"\n"), new.split(b"\n")
    blocks = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()

    def line(number: int) -> int:
        if number <= 0:
            return number
        index = number - 1
        for _, i1, i2, j1, j2 in blocks:
            if j1 <= index < j2:
                return i1 + min(index - j1, max(i2 - i1 - 1, 0)) + 1
        return number

    return line


def _kept(lane: Lane, options: Options, lanes: int) -> str | None:
    """The lane's `--keep-compat`; with one lane the run's too (`vam upgrade` sets it there)."""
    if lane.keep_compat is not None or lanes > 1:
        return lane.keep_compat
    return options.keep_compat
