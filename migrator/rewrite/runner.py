"""Runs the per-file pipeline over many files, in worker processes, and writes results.

Each worker builds its own engines once (one per pack of the run, `migrator.rewrite.lanes`).
The parent reads each file once to screen it; the bytes of the few files that pass go to a
worker, which transforms them and (when asked) writes the file atomically. Only findings
travel back to the parent, and the old and new bytes only for a diff. Results come back in
input order, so output is deterministic whatever `jobs` is.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from migrator.core import findings as F
from migrator.core.discover import SourceFile
from migrator.rewrite import stream
from migrator.rewrite.engine import FileResult, Options, Read
from migrator.rewrite.lanes import Chain, Lane

# multiprocessing, ctypes and the writer (tempfile) are imported where they are used: a
# check that needs no pool and writes nothing does not pay for them at start-up.

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

# Below this many files that need processing, a pool costs more than it saves.
_POOL_THRESHOLD = 32
_CHUNK = 16
# From this many files on, the workers read and screen them too (in chunks this big).
_SCREEN_IN_POOL = 1024
_SCREEN_CHUNK = 64
_PR_SET_PDEATHSIG = 1  # prctl(2)
# On Ctrl-C: how long the workers get to finish the file in hand, then to die of SIGTERM.
_STOP_GRACE_S = 5.0
_KILL_GRACE_S = 2.0


@dataclass(frozen=True)
class Job:
    """Everything a worker needs to rebuild the engines (picklable): the run's packs with
    their windows, in the order they apply to a file, and the switches they share."""

    lanes: tuple[Lane, ...]
    options: Options
    write: bool
    keep_new: bool


_engine: Chain | None = None
_job: Job | None = None
_stopping: Any = None  # a worker's view of the parent's stop flag (a shared byte)


def _init(job: Job) -> None:
    global _engine, _job
    _job = job
    # A diff needs the new bytes: files are streamed only when no diff is asked for.
    _engine = Chain(job.lanes, job.options, stream=not job.keep_new)


def _init_worker(job: Job, stopping: Any) -> None:
    """A pool worker: build the engine, and die with the parent (a killed `vam` must not
    leave workers that go on writing files). Ctrl-C is the parent's business: a worker
    that died of it mid-queue-operation would leave the pool locked and the parent waiting
    on it for ever; the parent stops the workers itself (`_stop`)."""
    global _stopping
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # held by the parent while it forked us
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _stopping = stopping
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
        if os.getppid() == 1:  # the parent died before prctl took effect
            os._exit(1)
    if _job is not job:  # a forked worker has the parent's engine for this very job
        _init(job)


def _work(
    item: tuple[SourceFile, Read], write: bool = True, screened: bool = False
) -> FileResult:
    assert _engine is not None and _job is not None
    source, data = item
    if _stopping is not None and _stopping.value:  # interrupted: the parent wants no more
        return FileResult(str(source.path))
    try:
        result = _engine.process(source, data, screened)
    except Exception as exc:  # a bug in vam must not stop the run or touch the file
        result = FileResult(str(source.path), failed=True)
        result.findings.append(F.failure(
            F.INTERNAL_ERROR, f"internal error ({type(exc).__name__}: {exc}); file left "
            "untouched - please report this with the file"))
    if result.new is not None and _job.write and write:
        from migrator.core.writer import WriteRefused, atomic_write

        try:
            if result.edits is not None:
                stream.write(source.path, result.edits)
            else:
                atomic_write(source.path, result.new)
        except WriteRefused as exc:
            result.failed = True
            result.findings.append(F.failure(F.UNWRITABLE, f"not written: {exc}"))
            result.new = None
        except OSError as exc:
            result.failed = True
            result.findings.append(F.failure(F.UNWRITABLE, f"cannot write: {exc.strerror or exc}"))
            result.new = None
    result.edits = None  # written, or not to be: the parent has no use for them
    if result.new is not None and not _job.keep_new:
        result.new = b""  # changed; the bytes themselves are not needed by the parent
    elif result.new is not None and isinstance(data, bytes):
        result.old = data  # for the diff, which then needs no second read
    # The one place a file's findings are final: the rewriters, the parse failure and the
    # write each add theirs, and they print in line order (stable: file-level ones, line 0,
    # first; same-position ones as found).
    result.findings = sorted(
        (replace(f, path=result.path) for f in result.findings), key=lambda f: (f.line, f.col)
    )
    return result


def default_jobs() -> int:
    """The CPUs this process may run on (its affinity mask, as a container or taskset sets)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def pool_size(jobs: int, files: int) -> int:
    """Worker processes for `files` files needing work when `jobs` were asked for: never more
    than the CPUs available, nor than the chunks of work there are to hand out (a worker
    beyond those only costs its start-up); at least 1."""
    chunks = -(-files // _CHUNK)
    return max(1, min(jobs, default_jobs(), chunks))


def run(
    sources: Sequence[SourceFile],
    job: Job,
    jobs: int,
    on_result: Callable[[FileResult], None] | None = None,
) -> Iterator[FileResult]:
    """Process `sources`, yielding one result per file in input order.

    Few files: the parent screens every file first (its one read and the byte tests); only
    files that may hold a reference go to the workers, with their bytes, and a pool is
    started only when there are enough of them to pay for it. Many files (a whole tree):
    reading and screening are most of the work, so the workers do them too, in chunks of
    files in walk order.
    """
    _init(job)
    assert _engine is not None
    if min(jobs, default_jobs()) > 1 and len(sources) >= _SCREEN_IN_POOL:
        with _pool(job, min(jobs, default_jobs())) as pool:
            with _sigint_held():
                results = pool.map(_screen_and_work, sources, chunksize=_SCREEN_CHUNK)
            yield from _merge(sources, [True] * len(sources), results, on_result)
        return
    screened = [_engine.screen(source) for source in sources]
    keep = [data is not None for data in screened]
    todo = [(s, d) for s, d in zip(sources, screened, strict=True) if d is not None]
    workers = pool_size(jobs, len(todo))
    work = partial(_work, screened=True)  # the parent made the byte tests
    if workers <= 1 or len(todo) < _POOL_THRESHOLD:
        yield from _merge(sources, keep, map(work, todo), on_result)
        return
    with _pool(job, workers) as pool:
        with _sigint_held():
            results = pool.map(work, todo, chunksize=_CHUNK)
        yield from _merge(sources, keep, results, on_result)


def _screen_and_work(source: SourceFile) -> FileResult:
    assert _engine is not None
    if _stopping is not None and _stopping.value:
        return FileResult(str(source.path))
    data = _engine.screen(source)
    if data is None:
        return FileResult(str(source.path))
    return _work((source, data), screened=True)


@contextmanager
def _pool(job: Job, workers: int) -> Iterator[ProcessPoolExecutor]:
    """A pool of `workers` processes; shut down in order when the run ends, stopped within
    a bound when it does not (Ctrl-C, an error): `_stop`."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    stopping = context.RawValue("b", 0)  # no lock: a worker only reads it
    pool = ProcessPoolExecutor(
        workers, mp_context=context, initializer=_init_worker, initargs=(job, stopping)
    )
    try:
        yield pool
    except BaseException:
        _stop(pool, stopping)
        raise
    pool.shutdown(wait=True)


def _stop(pool: ProcessPoolExecutor, stopping: Any) -> None:
    """Stop the workers, every wait bounded: pending chunks are cancelled, the queued ones
    skipped (each worker finishes the file in hand, whose write is atomic), then a worker
    still there is terminated, then killed. A second Ctrl-C meanwhile is ignored."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    previous = _ignore_sigint()
    try:
        stopping.value = 1
        pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + _STOP_GRACE_S
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for end in ("terminate", "kill"):
            alive = [p for p in processes if p.is_alive()]
            for process in alive:
                getattr(process, end)()
            for process in alive:
                process.join(_KILL_GRACE_S)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


@contextmanager
def _sigint_held() -> Iterator[None]:
    """SIGINT blocked while the pool forks its workers (the first submit forks them all):
    a worker forked with the parent's handler would die of a Ctrl-C that comes before its
    initializer ignores it, with a traceback. A Ctrl-C meanwhile reaches the parent after."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _ignore_sigint() -> Any:
    """Ignore SIGINT in this process (main thread only); the handler it had, or None."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_bytes(source: SourceFile, data: bytes, job: Job) -> FileResult:
    """Process `data` as the content of `source` in this process (stdin: never written,
    whatever `job.write` says)."""
    _init(job)
    return _work((source, data), write=False)


def _merge(
    sources: Sequence[SourceFile],
    keep: list[bool],
    processed: Iterator[FileResult],
    on_result: Callable[[FileResult], None] | None,
) -> Iterator[FileResult]:
    for source, kept in zip(sources, keep, strict=True):
        result = next(processed) if kept else FileResult(str(source.path))
        if on_result:
            on_result(result)
        yield result
