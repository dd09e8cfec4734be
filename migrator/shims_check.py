"""`vam shims check`: every old name of a move table, probed in a fresh interpreter.

For each old module path (table rows and their listed submodules) and each moved symbol, a
subprocess imports the old name twice and the new one once, and reports: it imports, the
table row warned exactly once (attributed to the importing line, message naming old, new,
the step and `vam migrate`), and old and new are the same object. A probe whose import
needs a missing optional third-party module (torch_npu, mooncake, vllm...) is skipped; a
missing first-party module is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from migrator.shims_probe import PROBE_SOURCE, WarmProbes
from rules import Pack
from shims import ShimFinder, default_env_var
from shims._targets import Installed

# Per wait. The slowest probe measured: 96 s, a fresh interpreter at load 22 on 2 cores
# (vLLM and torch imported cold); 60 s timed out 8-9 probes there. 3x that, with margin.
DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Probe:
    """One old name to check. `row` is the table row's `old` (the warning names it)."""

    old: str
    new: str
    kind: str  # "module" or "symbol"
    row: str
    version: str


@dataclass(frozen=True)
class ProbeResult:
    """What a probe saw; None where the probe did not get that far."""

    probe: Probe
    imports: bool | None
    warns_once: bool | None
    same_object: bool | None
    status: str  # "ok", "FAIL", "timeout" or "skipped (missing X)"
    detail: str = ""

    @property
    def failed(self) -> bool:
        return not (self.status == "ok" or self.status.startswith(("skipped", NOT_SERVED)))


NOT_SERVED = "not served"


@dataclass(frozen=True)
class StepVerdict:
    """One step's heading in the report: does the installed package serve it, and why."""

    version: str
    removal: str | None
    verdict: str


def finder_for(pack: Pack, package_paths: Sequence[str] = ()) -> ShimFinder:
    """The finder a probe's interpreter builds: targets looked up on the probe's sys.path
    (`package_paths`, the current directory, then this interpreter's sys.path)."""
    search = [*package_paths, os.getcwd(), *sys.path]
    return ShimFinder(pack, default_env_var(pack), Installed(search))


def not_importable(pack: Pack, package_paths: Sequence[str] = ()) -> list[str]:
    """`pack.packages` that a probe could not import (looked up as `finder_for` does); when
    it is all of them there is nothing to check against."""
    installed = Installed([*package_paths, os.getcwd(), *sys.path])
    missing = []
    for package in pack.packages:
        try:
            installed.module_file(package)
        except LookupError:
            missing.append(package)
    return missing


def probes(pack: Pack, finder: ShimFinder | None = None) -> list[Probe]:
    """The old names `pack`'s shims serve at run time, in table order: module rows, each
    followed by its listed submodules, then symbol rows."""
    finder = finder or ShimFinder(pack, default_env_var(pack))
    found: list[Probe] = []
    for step in pack.steps:
        for move in step.modules:
            entry = finder.modules.get(move.old)
            if entry is None or entry.version != step.version:
                continue  # a later step took the name back, or its target is not installed
            found.append(Probe(move.old, move.new, "module", move.old, step.version))
            for sub in move.submodules:
                found.append(
                    Probe(
                        f"{move.old}.{sub}", f"{move.new}.{sub}", "module", move.old, step.version
                    )
                )
    for moved in finder.hosts.values():
        for entry in moved.values():
            found.append(Probe(entry.old, entry.new, "symbol", entry.old, entry.version))
    return found


def unserved(pack: Pack, finder: ShimFinder) -> list[ProbeResult]:
    """Rows left out because their target is not installed, as results. In a step that does
    not apply at all (another release's layout) they are just not served; in a step that
    otherwise applies, a missing target is a broken package: a failure."""
    out: list[ProbeResult] = []
    for step in pack.steps:
        fit = finder.fit(step.version)
        partial = len(fit.missing) < fit.rows
        rows: tuple[Any, ...] = (*step.modules, *step.symbols)
        for rule in rows:
            if rule.new not in fit.missing:
                continue
            kind = "module" if rule in step.modules else "symbol"
            probe = Probe(rule.old, rule.new, kind, rule.old, step.version)
            if partial:
                detail = f"target {rule.new} is not installed, though the step's other targets are"
                out.append(ProbeResult(probe, False, None, None, "FAIL", detail))
            else:
                out.append(ProbeResult(probe, None, None, None, NOT_SERVED, "target not installed"))
    return out


def verdicts(pack: Pack, finder: ShimFinder) -> list[StepVerdict]:
    """Per step, in table order: applies / applies in part / does not apply, and why."""
    return [
        StepVerdict(step.version, step.removal, finder.fit(step.version).verdict)
        for step in pack.steps
    ]


def check(
    pack: Pack,
    package_paths: Sequence[str | os.PathLike[str]] = (),
    timeout: float = DEFAULT_TIMEOUT_S,
    jobs: int | None = None,
) -> list[ProbeResult]:
    """Probe every old name of `pack`, `jobs` subprocesses at a time.

    Args:
        package_paths: directories put first on each probe's sys.path (the package under
            test), ahead of the current directory and the installed packages.
        timeout: seconds per probe; a probe that runs longer fails with status "timeout".
    """
    paths = [os.path.abspath(p) for p in package_paths]
    finder = finder_for(pack, paths)
    todo = probes(pack, finder)
    first_party = sorted({*pack.packages, *(p.old.split(".")[0] for p in todo)})
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", pack.shims_env)}
    env.pop(default_env_var(pack), None)
    workers = jobs or min(4, os.cpu_count() or 1)
    mine = threading.local()
    servers: list[WarmProbes] = []

    def run(probe: Probe) -> ProbeResult:
        server = getattr(mine, "server", None)
        if server is None:
            server = mine.server = WarmProbes(paths, first_party, env, timeout)
            servers.append(server)
        seen = server.run(_args(probe, paths, first_party))
        if seen is None:
            return _run_probe(probe, paths, first_party, env, timeout)
        return _result(probe, seen, timeout)

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = Results(pool.map(run, todo))
    finally:
        for server in servers:
            server.close()
    results.extend(unserved(pack, finder))
    results.steps = verdicts(pack, finder)
    return results


class Results(list[ProbeResult]):
    """`check`'s answer: the probe results, and each step's verdict in `steps`."""

    steps: list[StepVerdict]

    def __init__(self, items: Iterable[ProbeResult] = ()) -> None:
        super().__init__(items)
        self.steps = []


def _args(probe: Probe, paths: list[str], first_party: list[str]) -> dict[str, Any]:
    return {
        "old": probe.old,
        "new": probe.new,
        "kind": probe.kind,
        "row": probe.row,
        "version": probe.version,
        "paths": paths,
        "first_party": first_party,
    }


def _run_probe(
    probe: Probe, paths: list[str], first_party: list[str], env: dict[str, str], timeout: float
) -> ProbeResult:
    """`probe` in a fresh interpreter of its own."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", PROBE_SOURCE, json.dumps(_args(probe, paths, first_party))],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return _result(probe, {"timeout": True}, timeout)
    try:
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        seen = {"crash": tail}
    return _result(probe, seen, timeout)


def _result(probe: Probe, seen: dict[str, Any], timeout: float) -> ProbeResult:
    """The result of a probe from what it saw (as `shims_probe._probe` returns it)."""
    if seen.get("timeout"):
        return ProbeResult(probe, None, None, None, "timeout", f"no answer in {timeout:g} s")
    if "crash" in seen:
        return ProbeResult(probe, None, None, None, "FAIL", f"probe crashed: {seen['crash']}")
    if seen["skip"]:
        return ProbeResult(probe, None, None, None, f"skipped (missing {seen['skip']})")
    ok = seen["imports"] and seen["warns_once"] and seen["same"]
    return ProbeResult(
        probe,
        seen["imports"],
        seen["warns_once"],
        seen["same"],
        "ok" if ok else "FAIL",
        "; ".join(seen["problems"]),
    )


_HEADERS = ("old", "new", "imports", "warns once", "same object", "status")


def render(results: Sequence[ProbeResult]) -> str:
    """One section per step (a heading saying whether the installed package serves it, and
    why; then an aligned table of its old names and a line per failure), and a summary line.

    The steps come from `results.steps` when `results` is what `check` returned; a plain
    list gets one section per step version found in it.
    """
    steps = getattr(results, "steps", None) or [
        StepVerdict(v, None, "") for v in dict.fromkeys(r.probe.version for r in results)
    ]
    lines: list[str] = []
    for step in steps:
        mine = [r for r in results if r.probe.version == step.version]
        removal = f", old paths served until {step.removal}" if step.removal else ""
        heading = f"step {step.version}{removal}"
        lines.append(f"{heading}: {step.verdict}" if step.verdict else heading)
        lines.extend(_table([r for r in mine if r.status != NOT_SERVED]))
        left_out = sum(r.status == NOT_SERVED for r in mine)
        if left_out:
            lines.append(f"  {left_out} old name(s) not served: their targets are not installed")
        lines.append("")
    failed = [r for r in results if r.failed]
    for result in failed:
        lines.append(f"{result.probe.old}: {result.status}: {result.detail}")
    served = [r for r in results if r.status != NOT_SERVED]
    skipped = sum(r.status.startswith("skipped") for r in served)
    passed = len(served) - len(failed) - skipped
    summary = f"{len(served)} old names: {passed} ok, {skipped} skipped, {len(failed)} failed"
    left_out = len(results) - len(served)
    if left_out:
        summary += f"; {left_out} not served (targets not installed)"
    lines.append(summary)
    return "\n".join(lines)


def _table(results: Sequence[ProbeResult]) -> list[str]:
    if not results:
        return []

    def mark(value: bool | None) -> str:
        return "-" if value is None else "yes" if value else "no"

    rows = [
        (
            r.probe.old,
            r.probe.new,
            mark(r.imports),
            mark(r.warns_once),
            mark(r.same_object),
            r.status,
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in (_HEADERS, *rows)) for i in range(len(_HEADERS))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in (_HEADERS, *rows)
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines
