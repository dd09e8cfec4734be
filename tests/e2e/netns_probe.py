"""Code the multi-host e2e tests run inside an engine process (`EngineProcess.call` targets).

`set_load_failure_policy` switches what the engine does with a KV load that failed, as
`kv_load_failure_policy` would have configured it (vLLM's scheduler reads the flag at every
step): one decode engine then shows both policies without a second engine start.
"""

from __future__ import annotations

from typing import Any


def set_load_failure_policy(llm: Any, policy: str) -> str:
    """`policy`: `"recompute"` or `"fail"`; returns it. Uniproc engines only."""
    if policy not in ("recompute", "fail"):
        raise ValueError(f"unknown kv_load_failure_policy {policy!r}")
    scheduler = llm.llm_engine.engine_core.engine_core.scheduler
    scheduler.recompute_kv_load_failures = policy == "recompute"
    return policy
