"""Engine-level benchmark of the CPU offload connector: is an offload hit as cheap as a local
prefix-cache hit?

Run through `python benchmarks/bench_cpu_offload.py --engine [--layers 4] [--repeats 5]
[--json PATH]` (the e2e venv: vLLM CPU build, transformers, tokenizers).

One engine with the connector (tiny Llama, `--layers` layers, built at run time). Per
repetition, 16 fresh prompts sharing prefixes (4 prefixes of 512 tokens x 4 suffixes of 96)
and, timed inside the engine process (wall and process CPU time, `generate` only):

1. pass 1: nothing cached; computes, stores every full block to the CPU pool;
2. pass 2, local: the same prompts again, vLLM's own prefix cache warm;
3. pass 2, offload: `reset_prefix_cache()` (vLLM's cache only), the same prompts again: every
   full block is loaded from the CPU pool.

`WARMUP` repetitions run first and are not counted.

The two pass 2 alternate in order between repetitions (load drift). The figure is offload /
local, the median of the per-repetition ratios. The connector's pool is reset between
repetitions. Executors: `uni` (scheduler and worker in one process: direct metadata calls) and
`mp` (the worker in its own process: its calls go through ZMQ; the CPU time then covers only
the front-end process, so only wall time is reported for it). A no-connector engine gives the
recompute time of pass 2 for scale.

`--json PATH` writes what the table shows, per engine (`offload, uni`, `offload, mp`,
`no connector, uni`): the medians of each pass (`wall_s`, `cpu_s`, `cached` tokens), the two
ratios, `cpu_scope` (what the CPU time covers) and every repetition's samples; beside them the
settings, date, machine and versions.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# One OMP thread bound to core 0 for every engine: with vLLM's default (one per core) the OMP
# barriers spin while the other core runs someone else's job, and a pass's CPU time swings
# 10-30x at random on this shared 2-core machine (measured: 22 ms to 960 ms for one pass).
ENGINE_ENV = {"VLLM_CPU_OMP_THREADS_BIND": "0"}
PREFIXES, SUFFIXES, PREFIX_TOKENS, SUFFIX_TOKENS = 4, 4, 512, 96
VOCAB = 512
WARMUP = 3


# ---- runs inside the engine process (EngineProcess.call target) --------------------------


def timed_pass(
    llm: Any, prompt_token_ids: list[list[int]], max_tokens: int, reset: bool
) -> dict[str, float]:
    """Optionally reset vLLM's prefix cache, then time one `generate` of the prompts."""
    from vllm import SamplingParams

    if reset:
        llm.reset_prefix_cache()
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    prompts: list[Any] = [{"prompt_token_ids": ids} for ids in prompt_token_ids]
    wall, cpu = time.perf_counter(), time.process_time()
    out = llm.generate(prompts, params, use_tqdm=False)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall_s": wall, "cpu_s": cpu, "cached": sum(r.num_cached_tokens for r in out)}


# ---- driver ---------------------------------------------------------------------------------


def shared_prefix_prompts(seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(PREFIXES):
        prefix = [rng.randrange(3, VOCAB) for _ in range(PREFIX_TOKENS)]
        for _ in range(SUFFIXES):
            out.append(prefix + [rng.randrange(3, VOCAB) for _ in range(SUFFIX_TOKENS)])
    return out


def build_model(layers: int) -> Path:
    """The e2e tiny Llama (tokenizer and recipe), with `layers` decoder layers."""
    import torch
    from tiny_model import build_tiny_llama
    from transformers import LlamaConfig, LlamaForCausalLM

    model = build_tiny_llama(Path(tempfile.mkdtemp(prefix="vam-bench-offload-")))
    if layers != 2:
        config = LlamaConfig.from_pretrained(model)
        config.num_hidden_layers = layers
        torch.manual_seed(0)
        LlamaForCausalLM(config).bfloat16().save_pretrained(model, safe_serialization=True)
    return model


def run_engine(model: Path, executor: str, connector: bool, repeats: int) -> dict[str, Any]:
    from harness import UNIPROC_ENV, UNIPROC_LLM_KWARGS, EngineProcess

    address = f"ipc://{tempfile.mkdtemp(prefix='vam-bench-meta-')}/meta.ipc"
    kv = {
        "kv_connector": "CPUOffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "metadata_server_address": address,
            "cpu_capacity_bytes": 1 << 30,
        },
    }
    uni = executor == "uni"
    engine = EngineProcess(
        model,
        kv_transfer_config=kv if connector else None,
        llm_kwargs={**(UNIPROC_LLM_KWARGS if uni else {}), "max_num_seqs": 16},
        env={**(UNIPROC_ENV if uni else {}), **ENGINE_ENV},
    ).start()
    target = f"{Path(__file__).resolve()}:timed_pass"
    samples: dict[str, list[dict[str, float]]] = {"pass1": [], "local": [], "offload": []}
    try:
        # The first repetitions are dropped: vLLM's CPU kernels build their oneDNN primitives
        # for each new batch shape, which made single passes 10-20x slower.
        for rep in range(repeats + WARMUP):
            prompts = shared_prefix_prompts(seed=rep)
            engine.reset_prefix_cache(reset_connector=connector)
            got = {
                "pass1": engine.call(target, prompt_token_ids=prompts, max_tokens=1, reset=False)
            }
            # Alternate which pass 2 runs first, so that load drift hits both alike (after the
            # offload pass vLLM's cache is warm again with the same blocks).
            for key in ("local", "offload") if rep % 2 else ("offload", "local"):
                got[key] = engine.call(
                    target, prompt_token_ids=prompts, max_tokens=1, reset=key == "offload"
                )
            if rep >= WARMUP:
                for key, value in got.items():
                    samples[key].append(value)
    finally:
        engine.close()
    return {
        key: {
            field: statistics.median(s[field] for s in values)
            for field in ("wall_s", "cpu_s", "cached")
        }
        for key, values in samples.items()
    } | {
        "samples": samples,
        "cpu_scope": "whole engine" if uni else "front-end process only",
        "ratio_wall": statistics.median(
            o["wall_s"] / loc["wall_s"]
            for o, loc in zip(samples["offload"], samples["local"], strict=True)
        ),
        "ratio_cpu": statistics.median(
            o["cpu_s"] / loc["cpu_s"]
            for o, loc in zip(samples["offload"], samples["local"], strict=True)
        ),
    }


def settings(layers: int, repeats: int) -> dict[str, Any]:
    return {
        "model": f"tiny Llama (tests/e2e/tiny_model.py), {layers} layers, bf16",
        "layers": layers,
        "repeats": repeats,
        "warmup": WARMUP,
        "prompts": PREFIXES * SUFFIXES,
        "prefixes": PREFIXES,
        "prefix_tokens": PREFIX_TOKENS,
        "suffix_tokens": SUFFIX_TOKENS,
        "max_tokens": 1,
        "statistic": "median (ratios: median of the per-repetition ratios)",
        "engine_env": ENGINE_ENV,
    }


def row(name: str, r: dict[str, Any], show_cpu_ratio: bool = True) -> str:
    """One Markdown row of the printed table."""
    cpu = f"{r['ratio_cpu']:.2f}" if show_cpu_ratio else "n/a"
    second = "(recompute) " if name.startswith("no connector") else ""
    return (
        f"| {name} | {r['pass1']['wall_s'] * 1e3:.1f} "
        f"| {r['local']['wall_s'] * 1e3:.1f} / {r['local']['cpu_s'] * 1e3:.1f} "
        f"| {second}{r['offload']['wall_s'] * 1e3:.1f} / {r['offload']['cpu_s'] * 1e3:.1f} "
        f"| {r['ratio_wall']:.3f} / {cpu} "
        f"| {r['local']['cached']:.0f} / {r['offload']['cached']:.0f} |"
    )


def main(layers: int, repeats: int, executors: list[str], json_path: Path | None = None) -> int:
    sys.path.insert(0, str(REPO / "tests" / "e2e"))  # the e2e harness and tiny model
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from run_info import run_info

    info = run_info("vllm", "torch")
    model = build_model(layers)
    print(
        f"{layers}-layer tiny Llama, {PREFIXES * SUFFIXES} prompts "
        f"({PREFIXES} prefixes x {PREFIX_TOKENS} tokens, suffixes of {SUFFIX_TOKENS}), "
        f"max_tokens=1, medians of {repeats}\n"
    )
    print(
        "| engine | pass 1 ms | pass 2 local ms (wall / CPU) | pass 2 offload ms (wall / CPU) "
        "| offload / local (wall / CPU) | cached tokens (local / offload) |\n"
        "|---|---:|---:|---:|---:|---:|"
    )
    engines: dict[str, dict[str, Any]] = {}
    for executor in executors:
        name = f"offload, {executor}"
        engines[name] = run_engine(model, executor, connector=True, repeats=repeats)
        print(row(name, engines[name], show_cpu_ratio=executor == "uni"), flush=True)
    name = "no connector, uni"
    engines[name] = run_engine(model, "uni", connector=False, repeats=repeats)
    engines[name]["note"] = "no connector: the `offload` pass recomputes (scale only)"
    print(row(name, engines[name]), flush=True)
    if json_path:
        info["load_average_1m"].append(os.getloadavg()[0])
        result = {**info, "settings": settings(layers, repeats), "engines": engines}
        json_path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0
