"""Loggers for vllm_ascend that print with vLLM's own.

vLLM configures handlers on its `vllm` logger only; a logger named after our module would go to
the root logger, where INFO is dropped. `init_logger` returns a child of `vllm` named after the
module, so our lines carry vLLM's format, level (`VLLM_LOGGING_LEVEL`) and destination, and can
still be filtered by module. Stdlib only: works before and without vLLM.
"""

from __future__ import annotations

import logging

__all__ = ["init_logger"]


def init_logger(name: str) -> logging.Logger:
    """The logger for module `name` (pass `__name__`): `vllm.<name>`."""
    return logging.getLogger(f"vllm.{name}")
