"""The probe of `vam shims check`, and the warm interpreter that runs probes by the batch.

A probe imports vllm_ascend modules, which import vLLM and torch: about 3.5 s of CPU each
(4,400 modules), 20-96 s of wall time on a loaded 2-core machine, where 60 s timeouts
failed. A `WarmProbes` interpreter runs its first probe in a forked child, imports the
third-party modules that child imported (never a first-party one: the probes must find
those unimported), then forks one child per probe from there: each probe still starts with
no first-party module loaded and no warning given, and pays only for its own package. Where
that cannot hold (a third-party import pulls a first-party module in, or the interpreter
stops answering), the probes go back to a fresh interpreter each (`fresh`).
"""

from __future__ import annotations

import inspect
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

# The probe runs in another interpreter from its source text: each function below is stdlib
# only and self-contained (its imports inside), and `PROBE_SOURCE` is their text.


def _probe_load(a: dict[str, Any], dotted: str) -> object:  # pragma: no cover - subprocess
    """The object `dotted` names, reached as user code reaches it."""
    import importlib

    if a["kind"] == "module":
        return importlib.import_module(dotted)
    # A real use, as user code writes it: `getattr(module, name)` would be a probe,
    # which the shims answer without a warning.
    module, _, name = dotted.rpartition(".")
    scope: dict[str, object] = {}
    exec(f"from {module} import {name} as value", scope)
    return scope["value"]


def _probe_same(
    a: dict[str, Any], first: object, second: object, target: object, problems: list[str]
) -> bool:  # pragma: no cover - runs in the probe subprocess
    """Whether both loads of the old name gave the new name's object (and, for a symbol,
    whether `dir()` of its old module lists it); each miss is added to `problems`."""
    import sys

    same = first is target and second is target
    if a["kind"] == "module":
        same = same and sys.modules.get(a["old"]) is target
    else:
        module, _, name = a["old"].rpartition(".")
        if name not in dir(sys.modules[module]):
            problems.append(f"{name} not in dir({module})")
            same = False
    if not same:
        problems.append(f"{a['old']} is not {a['new']}")
    return same


def _probe_warned_once(
    a: dict[str, Any], caught: list[Any], problems: list[str]
) -> bool:  # pragma: no cover - runs in the probe subprocess
    """Whether the table row warned exactly once, at the probe's line, naming old, step and
    `vam migrate`; what is wrong otherwise is added to `problems`."""
    ours = [w for w in caught if getattr(w.message, "old", None) == a["row"]]
    text = str(ours[0].message) if ours else ""
    named = all(s in text for s in (a["row"], a["version"], "vam migrate"))
    once = len(ours) == 1 and issubclass(ours[0].category, DeprecationWarning)
    # The probe's own line is the user's: `<string>`, as `python -c` names it.
    here = once and ours[0].filename == "<string>"
    if len(ours) != 1:
        problems.append(f"{len(ours)} warnings for {a['row']}, expected 1")
    elif not here:
        problems.append(f"warning attributed to {ours[0].filename}:{ours[0].lineno}")
    elif not named:
        problems.append(f"warning does not name old, step and `vam migrate`: {text}")
    return once and named and here


def _probe(a: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover - in the subprocess
    """The probe: loads the old name twice and the new one once; returns what it saw."""
    import traceback
    import warnings

    seen: dict[str, Any] = {"imports": False, "warns_once": None, "same": None, "skip": None}
    problems: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            first = _probe_load(a, a["old"])
            second = _probe_load(a, a["old"])
            seen["imports"] = True
            target = _probe_load(a, a["new"])
        except ModuleNotFoundError as exc:
            top = (exc.name or "").split(".")[0]
            if top and top not in a["first_party"]:
                seen["skip"] = exc.name
            problems.append(f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            problems.append("".join(traceback.format_exception_only(type(exc), exc)).strip())
        else:
            seen["same"] = _probe_same(a, first, second, target, problems)
    if seen["imports"]:
        seen["warns_once"] = _probe_warned_once(a, caught, problems)
    seen["problems"] = problems
    return seen


def _serve() -> None:  # pragma: no cover - runs in the probe server
    """Answer one probe per line of stdin (JSON arguments) with one JSON line, each probe in
    a forked child; after each, import what the child imported that is not first-party, and
    say whether that left the first-party packages unimported (`{"warm": bool}`)."""
    import json
    import os
    import sys
    import warnings

    setup = json.loads(sys.argv[1])
    sys.path[:0] = setup["paths"]
    first_party = {*setup["first_party"], "shims"}
    protocol = os.fdopen(os.dup(1), "w")  # imports may print: they get /dev/null
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.dup2(1, 2)
    warnings.simplefilter("ignore")  # only the children record warnings
    for line in sys.stdin:
        start = set(sys.modules)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                seen = _probe(json.loads(line))
                seen["loaded"] = [m for m in sys.modules if m not in start]
                answer = json.dumps(seen)
            except BaseException as exc:  # noqa: BLE001 - any failure is the probe's answer
                answer = json.dumps({"crash": f"{type(exc).__name__}: {exc}"})
            with os.fdopen(write, "w") as out:
                out.write(answer)
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            answer = pipe.read()
        _, status = os.waitpid(pid, 0)
        seen = json.loads(answer) if answer else {"crash": f"exit status {status}"}
        loaded = seen.pop("loaded", [])
        protocol.write(json.dumps(seen) + "\n")
        protocol.flush()
        for name in loaded:
            if name.split(".")[0] not in first_party:
                try:
                    __import__(name)
                except BaseException:  # noqa: BLE001,S110 - the next child imports it again
                    pass
        warm = not any(m.split(".")[0] in first_party for m in sys.modules)
        protocol.write(json.dumps({"warm": warm}) + "\n")
        protocol.flush()
        if not warm:
            return  # a first-party module got in: the client goes back to fresh probes


# Annotations stay unevaluated in the subprocess, as they are here.
_FUNCTIONS = "from __future__ import annotations\n\n" + "\n\n".join(
    textwrap.dedent(inspect.getsource(f))
    for f in (_probe_load, _probe_same, _probe_warned_once, _probe)
)
PROBE_SOURCE = _FUNCTIONS + (
    "\nimport json, sys\n_args = json.loads(sys.argv[1])\nsys.path[:0] = _args['paths']\n"
    "print(json.dumps(_probe(_args)))\n"
)
SERVER_SOURCE = _FUNCTIONS + "\n\n" + textwrap.dedent(inspect.getsource(_serve)) + "\n_serve()\n"


class WarmProbes:
    """A probe server (`_serve`), for one thread at a time; started on its first probe."""

    def __init__(
        self, paths: list[str], first_party: list[str], env: dict[str, str], timeout: float
    ):
        self.timeout = timeout
        self.usable = True
        self._setup = json.dumps({"paths": paths, "first_party": first_party})
        self._env = env
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""

    def run(self, args: dict[str, Any]) -> dict[str, Any] | None:
        """What the probe saw (`{"timeout": True}` when it gave no answer in `timeout`
        seconds: the server is killed, and the next probe starts another); None when this
        server cannot run probes (the caller runs them in fresh interpreters). Each wait
        (the answer, then the server's warm-up after it) is bounded by `timeout`."""
        if not self.usable:
            return None
        if self._proc is None:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", SERVER_SOURCE, self._setup],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=self._env,
                start_new_session=True,  # a timeout kills the server and its child together
            )
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(args).encode() + b"\n")
            self._proc.stdin.flush()
        except OSError:
            self._give_up()
            return None
        line = self._line()
        if line is None:
            self.close()
            return {"timeout": True}
        if not line:
            self._give_up()
            return None
        seen: dict[str, Any] = json.loads(line)
        ready = self._line()  # the server imported what the probe did: bounded as well
        if ready is None:
            self.close()
        elif not ready or not json.loads(ready).get("warm"):
            self._give_up()
        return seen

    def _give_up(self) -> None:
        self.usable = False
        self.close()

    def _line(self) -> bytes | None:
        """The server's next line; b"" when it ended, None when `timeout` passed first."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return b""
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def close(self) -> None:
        """Stop the server and any probe it runs (bounded: SIGKILL, then a 10 s wait)."""
        proc, self._proc, self._buffer = self._proc, None, b""
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
