"""Large text files are streamed (issue 19, "a 193 MB log with one reference costs ~1.4 s/MB
and ~6x its size in memory"): the result is the one reading the file whole gives, byte for
byte and finding for finding, and memory is bounded by a piece, not by the file."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

import rules
from migrator.core.discover import SourceFile
from migrator.core.resolver import Resolver
from migrator.rewrite import stream
from migrator.rewrite.engine import Engine, FileResult, Options
from migrator.rewrite.lanes import Lane
from migrator.rewrite.runner import Job, run

OLD = "vllm_ascend.distributed.mooncake_connector"
NEW = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"
OLD_PATH = OLD.replace(".", "/")
PIECE = 4096
FILLER = "INFO 12-02 05:20:31 [engine.py:88] Avg prompt throughput: 12.3 tokens/s, vllm\n"

# Each a stretch of text with something the text rules treat specially.
SNIPPETS = {
    "plain": f"connector={OLD} loaded\n",
    "entry": f"module_path: {OLD}:MooncakeConnector\n",
    "path": f"see vllm_ascend/distributed/mooncake_connector.py for {OLD}.x\n",
    "import": 'python -c "from vllm_ascend.distributed.utils import align_memory"\n',
    "pinned": f"https://github.com/vllm-project/vllm-ascend/blob/v0.9.1/{OLD.replace('.', '/')}.py\n",
    "ignored": f"{OLD}  # vam: ignore\n",
    "hunk": f"@@ -1,2 +1,2 @@\n-import {OLD}\n+import {NEW}\n same\nafter {OLD}\n",
    "headers": f"--- a/{OLD.replace('.', '/')}.py\n+++ b/{NEW.replace('.', '/')}.py\n",
    "fence": f"```diff\n-{OLD}\n+{NEW}\n```\n{OLD}\n",
    "cjk": f"日志：{OLD}中文\n",
    "traceback": (
        "Traceback (most recent call last):\n"
        f'  File "/site-packages/{OLD_PATH}.py", line 120, in start_load_kv\n'
        f"    from {OLD} import MooncakeConnector\n"
        f"ModuleNotFoundError: No module named '{OLD}'\n"
    ),
}


def _corpus(newline: str = "\n", bom: bool = False, tail: bool = True) -> bytes:
    """Filler with every snippet at several places, some across piece boundaries."""
    parts = []
    for round_ in range(3):
        for index, snippet in enumerate(SNIPPETS.values()):
            parts.append(FILLER * (7 * index + 13 * round_ + 1))
            parts.append(snippet)
    parts.append("x" * (3 * PIECE) + f" {OLD} " + "y" * PIECE + "\n")  # a line longer than a piece
    parts.append(f"last {OLD}" + ("\n" if tail else ""))
    text = "".join(parts).replace("\n", newline)
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "CHUNK", PIECE)
    monkeypatch.setattr(stream, "STREAM_MIN", 1)


def _engine(streaming: bool, **options: object) -> Engine:
    resolver = Resolver(rules.load_pack("vllm_ascend"))
    return Engine(resolver, Options(**options), stream=streaming)  # type: ignore[arg-type]


def _both(path: Path, **options: object) -> tuple[FileResult, FileResult]:
    source = SourceFile(path, path.parent, "text")
    whole = _engine(False, **options).process(source)
    streamer = _engine(True, **options)
    data = streamer.screen(source)
    assert isinstance(data, stream.Streamed)
    return whole, streamer.process(source, data)


def _same_findings(whole: FileResult, streamed: FileResult) -> None:
    def key(result: FileResult) -> list[tuple[object, ...]]:
        return [(f.line, f.col, f.code, f.message) for f in result.findings]

    assert key(streamed) == key(whole)
    assert key(whole)  # the corpus is not vacuous


@pytest.mark.usefixtures("small_pieces")
@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("log.txt", _corpus()),
        ("crlf.txt", _corpus("\r\n")),
        ("cr.txt", _corpus("\r")),
        ("bom.txt", _corpus(bom=True)),
        ("no-newline-at-end.txt", _corpus(tail=False)),
        ("changes.patch", _corpus()),
    ],
)
def test_a_streamed_file_is_migrated_as_one_read_whole(tmp_path: Path, name: str, data: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    whole, streamed = _both(path)
    _same_findings(whole, streamed)
    assert whole.new is not None and streamed.edits is not None
    assert streamed.encoding == whole.encoding
    stream.write(path, streamed.edits)
    assert path.read_bytes() == whole.new


@pytest.mark.usefixtures("small_pieces")
def test_check_mode_reports_a_streamed_file_as_one_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(_corpus("\r\n"))
    _same_findings(*_both(path, report_only=True))


@pytest.mark.usefixtures("small_pieces")
@pytest.mark.parametrize(
    "data",
    [b"\x00" + _corpus(), _corpus() + b"# vam: ignore-file\n"],
    ids=["NUL byte: binary", "ignore-file pragma at the end"],
)
def test_what_makes_a_file_skipped_anywhere_in_it_still_does(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(data)
    source = SourceFile(path, tmp_path, "text")
    streamer = _engine(True)
    result = streamer.process(source, stream.Streamed(len(data)))
    assert result.findings == [] and result.new is None
    assert _engine(False).process(source).findings == []


@pytest.mark.usefixtures("small_pieces")
def test_invalid_utf8_deep_in_a_streamed_file_fails_it_untouched(tmp_path: Path) -> None:
    data = _corpus()
    at = len(data) // 2
    path = tmp_path / "log.txt"
    path.write_bytes(data[:at] + b"\xff" + data[at:])
    result = _engine(True).process(SourceFile(path, tmp_path, "text"), stream.Streamed(0))
    assert result.failed and result.new is None
    assert f"invalid utf-8 byte 0xff at offset {at}" in result.findings[0].message


@pytest.mark.usefixtures("small_pieces")
def test_a_file_changed_between_read_and_write_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(_corpus())
    _, streamed = _both(path)
    assert streamed.edits is not None
    path.write_bytes(b"someone else's " + _corpus())
    with pytest.raises(OSError, match="changed while vam read it"):
        stream.write(path, streamed.edits)
    assert path.read_bytes() == b"someone else's " + _corpus()
    assert [p.name for p in tmp_path.iterdir()] == ["log.txt"]  # no temporary file left


def test_memory_is_bounded_by_a_piece_not_by_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    piece = 64 * 1024
    monkeypatch.setattr(stream, "CHUNK", piece)
    monkeypatch.setattr(stream, "STREAM_MIN", 1 << 20)
    path = tmp_path / "big.log"
    with open(path, "wb") as out:
        block = (FILLER * 2000).encode()
        for index in range(20):  # about 3.2 MB, one reference in the middle
            out.write(block)
            if index == 10:
                out.write(f"INFO connector={OLD} loaded\n".encode())
    size = os.path.getsize(path)
    job = Job((Lane(rules.load_pack("vllm_ascend")),), Options(), write=True, keep_new=False)
    tracemalloc.start()
    try:
        results = list(run([SourceFile(path, tmp_path, "text")], job, jobs=1))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [f.new for f in results[0].findings] == [NEW]
    data = path.read_bytes()
    assert data.count(NEW.encode()) == 1 and OLD.encode() + b" " not in data
    assert len(data) == size + len(NEW) - len(OLD)
    assert peak < 8 * piece, f"peak {peak} bytes for a {size}-byte file"
