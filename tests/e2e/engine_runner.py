"""Child-process side of the e2e harness: one vLLM `LLM` driven by JSON commands.

Started by `harness.EngineProcess` as `python engine_runner.py SPEC_JSON_PATH`. The spec holds
the model folder and the `LLM(...)` keyword arguments (with `kv_transfer_config` as a dict).
Commands arrive one JSON object per line on stdin; each answer is one JSON line written to the
file descriptor in `VAM_RESULT_FD` (stdout and stderr stay free for vLLM's logs).

Commands (`{"op": ...}`):
- `generate`: `prompts` (list of str) or `prompt_token_ids` (list of list of int),
  `max_tokens`, optional `temperature` (default 0, greedy), `ignore_eos` (default true) ->
  `{"outputs": [{"prompt_token_ids", "token_ids", "text", "num_cached_tokens",
  "finish_reason"}]}`
- `reset_prefix_cache`: optional `reset_connector` -> `{"value": bool}`
- `call`: `target` ("pkg.module:function" or "/path/file.py:function"), `kwargs` ->
  `{"value": function(llm, **kwargs)}`, which must be JSON-serialisable. Runs in this
  process: with `VLLM_ENABLE_V1_MULTIPROCESSING=0` that is where the scheduler (and, with the
  uniproc executor, the worker) live.
- `shutdown`: shuts the engine down and exits -> `{"value": seconds the shutdown took}`

Every answer carries `"ok": true`, or `"ok": false, "error": "<type>: <message>"`.
The first answer, before any command, reports whether `LLM(...)` started.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import time
import traceback
from typing import Any


def _load_target(target: str) -> Any:
    module_name, _, func_name = target.rpartition(":")
    if module_name.endswith(".py"):
        spec = importlib.util.spec_from_file_location(
            f"_vam_target_{abs(hash(module_name))}", module_name
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    return getattr(module, func_name)


def _generate(llm: Any, cmd: dict[str, Any]) -> dict[str, Any]:
    from greedy import LOGPROBS, logprobs_json
    from vllm import SamplingParams

    params = SamplingParams(
        max_tokens=int(cmd.get("max_tokens", 16)),
        temperature=float(cmd.get("temperature", 0.0)),
        ignore_eos=bool(cmd.get("ignore_eos", True)),
        logprobs=LOGPROBS,
    )
    if "prompt_token_ids" in cmd:
        prompts: list[Any] = [{"prompt_token_ids": ids} for ids in cmd["prompt_token_ids"]]
    else:
        prompts = list(cmd["prompts"])
    results = llm.generate(prompts, params, use_tqdm=False)
    return {
        "outputs": [
            {
                "prompt_token_ids": list(r.prompt_token_ids or []),
                "token_ids": list(r.outputs[0].token_ids),
                "text": r.outputs[0].text,
                "num_cached_tokens": r.num_cached_tokens,
                "finish_reason": r.outputs[0].finish_reason,
                "logprobs": logprobs_json(r.outputs[0]),
            }
            for r in results
        ]
    }


def _shutdown(llm: Any) -> float:
    start = time.monotonic()
    engine = getattr(llm, "llm_engine", None)
    shutdown = getattr(engine, "shutdown", None)
    if callable(shutdown):
        shutdown()
    return time.monotonic() - start


def main() -> int:
    spec = json.loads(open(sys.argv[1], encoding="utf-8").read())
    out = os.fdopen(int(os.environ["VAM_RESULT_FD"]), "w", buffering=1)

    def answer(payload: dict[str, Any]) -> None:
        out.write(json.dumps(payload) + "\n")
        out.flush()

    try:
        from vllm import LLM
        from vllm.config import KVTransferConfig

        kwargs = dict(spec["llm_kwargs"])
        if spec.get("kv_transfer_config") is not None:
            kwargs["kv_transfer_config"] = KVTransferConfig(**spec["kv_transfer_config"])
        started = time.monotonic()
        llm = LLM(model=spec["model"], **kwargs)
        answer({"ok": True, "startup_s": time.monotonic() - started, "pid": os.getpid()})
    except BaseException as exc:  # report any start failure, then exit non-zero
        answer(
            {
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }
        )
        return 1

    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        op = cmd.get("op")
        try:
            if op == "generate":
                answer({"ok": True, **_generate(llm, cmd)})
            elif op == "reset_prefix_cache":
                value = llm.reset_prefix_cache(reset_connector=bool(cmd.get("reset_connector")))
                answer({"ok": True, "value": value})
            elif op == "call":
                fn = _load_target(cmd["target"])
                answer({"ok": True, "value": fn(llm, **cmd.get("kwargs", {}))})
            elif op == "shutdown":
                answer({"ok": True, "value": _shutdown(llm)})
                return 0
            else:
                answer({"ok": False, "error": f"ValueError: unknown op {op!r}"})
        except Exception as exc:
            answer(
                {
                    "ok": False,
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(),
                }
            )
    _shutdown(llm)
    return 0


if __name__ == "__main__":
    sys.exit(main())
