"""P/D time to first token: a single engine, our `MooncakeConnectorV1`, vLLM's own
`MooncakeConnector` (issue 14, goal 1; figures go to BENCHMARKS.md, "Mooncake P/D connector").

Tiny model, 1,024-token prompt, uniproc vLLM CPU engines in child processes
(`tests/e2e/harness.py`), Mooncake TCP on loopback for both connectors. Per repetition, fresh
prompts (no prefix-cache hit anywhere): one on the single engine (timed `max_tokens=1`), then
one prefill -> decode pair per variant, the variants rotating which goes first:
- `ours_idle_wait`: our connector as shipped (`IDLE_STEP_WAIT_S`);
- `ours_no_idle_wait`: the same engines with that wait set to 0 (the behaviour before);
- `vllm_mooncake`: vLLM 0.32's `MooncakeConnector` (`kv_role` kv_producer/kv_consumer,
  `mooncake_protocol: "tcp"`, its bootstrap server on the prefill engine at
  `VLLM_MOONCAKE_BOOTSTRAP_PORT`, `VLLM_HOST_IP=127.0.0.1`). The request parameters are those
  of vLLM's example proxy (examples/disaggregated/mooncake_connector/mooncake_connector_proxy.py):
  prefill `{do_remote_decode, transfer_id}`, decode `{do_remote_prefill, remote_engine_id,
  remote_bootstrap_addr, transfer_id}`. Its prefill time includes one engine step after
  `generate` (`pd_ttft_hooks.hand_off`: the step a served engine takes at once, which hands the
  finished request's blocks to its sender; without it the decode pull waits).

Prefill = the prefill engine's call; decode = the decode engine's call until its first token;
TTFT = their sum. Every timed call starts after `SETTLE_S` of idle (not timed), so that each
engine starts from the same state as on a host of its own (see `SETTLE_S`). Each decode's
token is compared with the single engine's greedy token for the same prompt (an untimed
single-engine run), and a last check compares 8 tokens (a fresh prompt per variant). Decode
steps = the decode worker's `get_finished` calls during the decode. Also printed: the floor
and the stages above it (`pd_ttft_stages.py`, traced inside the engines).

BENCHMARK-ONLY PATCH (vLLM's connector only): on a CPU build
`torch.accelerator.current_device_index()` raises ("Cannot access accelerator device when none
is available"), and `MooncakeConnectorWorker.__init__` calls it before anything else
(vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py:1186). The engines
of the `vllm_mooncake` variant only get a `sitecustomize.py` (a temp folder first on their
`PYTHONPATH`) that makes that function return 0. On a CPU build every call of it raises, so the
patch can only change code paths that would otherwise fail; no other engine gets it (checked
at start, `engines_patched` in the JSON). With it, vLLM 0.32's connector runs unchanged on the
CPU build; no further patch was needed.

Usage:
    python benchmarks/pd_ttft_bench.py [--repeats 5] [--prompt-tokens 1024] [--json PATH]
        [--variants ours_idle_wait ours_no_idle_wait vllm_mooncake]
(`python benchmarks/mooncake_pd_bench.py ttft ...` runs the same.)
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bench_cli

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path[:0] = [str(REPO), str(REPO / "subsystem"), str(REPO / "tests" / "e2e")]

from harness import (  # noqa: E402
    UNIPROC_LLM_KWARGS,
    EngineProcess,
    engine_env,
    free_port,
    token_prompts,
)
from mooncake_pd import MOONCAKE_ENV, pd_config  # noqa: E402
from pd_ttft_stages import decode_step_s, floor_table, memcpy_s, stage_table, stages  # noqa: E402
from run_info import run_info  # noqa: E402

# Every engine computes on ONE OMP thread bound to core 0, as `vllm serve` runs here ("Reducing
# Torch threads from 2 to 1 for serving"). The engines take turns (prefill, then decode), so they
# never compete for that core; with vLLM's default for offline engines (one thread per core)
# the OMP barriers of a forward pass spin against any other process's work and the same
# 1,024-token forward measured 4.9-12.4 ms in one engine.
OMP_BIND = "0"
# Before each timed call (single engine, prefill, decode) the machine idles this long (seconds,
# not timed). On one machine the engine that computes right after another engine pays for the
# caches the other left (measured, one engine: 6.0 ms right after its own previous forward,
# 11.8 ms right after another engine's, 8.3 ms after 50 ms idle). Without it the single engine,
# timed right after its own untimed check, was flattered and P/D, which hands over between two
# engines, penalised for a cost that separate hosts do not share.
SETTLE_S = 0.05
VARIANTS = ("ours_idle_wait", "ours_no_idle_wait", "vllm_mooncake")
HOOKS = "pd_ttft_hooks"
VLLM_PREFILL_ENGINE_ID = "bench-vllm-prefill"
PATCH_NAME = "torch.accelerator.current_device_index -> 0 (vLLM MooncakeConnector engines only)"
SITECUSTOMIZE = '''"""BENCHMARK-ONLY PATCH written by benchmarks/pd_ttft_bench.py: vLLM's
MooncakeConnector worker asks for the accelerator index, which raises on a CPU build; answer 0
instead."""
import torch


def _bench_only_device_index(*args, **kwargs):
    return 0


torch.accelerator.current_device_index = _bench_only_device_index
'''


@dataclass
class Pair:
    """One prefill/decode engine pair and how to run its prefill step."""

    name: str
    producer: EngineProcess
    consumer: EngineProcess
    bootstrap_port: int = 0  # vLLM's connector only
    idle_wait_s: float | None = None  # ours only: the decode side's `IDLE_STEP_WAIT_S`
    samples: dict[str, list[Any]] = field(
        default_factory=lambda: {
            "prefill": [], "decode": [], "steps": [], "token_equal": [],
            "prefill_stages": [], "decode_stages": [],
        }
    )  # fmt: skip
    last_stages: dict[str, dict[str, float]] = field(default_factory=dict)

    def prefill(self, prompt: list[list[int]]) -> list[dict[str, Any]]:
        """Run the prefill step (traced: `last_stages["prefill"]`); the decode side's
        `kv_transfer_params`."""
        transfer_id = f"xfer-{uuid.uuid4()}"
        request: dict[str, Any] = {"do_remote_decode": True}
        if self.bootstrap_port:
            request["transfer_id"] = transfer_id
        called = time.perf_counter()
        traced = self.producer.call(
            f"{HOOKS}:traced_generate",
            prompt_token_ids=prompt,
            max_tokens=1,
            kv_transfer_params=[request],
        )
        self.last_stages["prefill"] = stages(traced, called, time.perf_counter())
        if self.bootstrap_port == 0:
            params = [o["kv_transfer_params"] for o in traced["outputs"]]
            assert all(p and p["do_remote_prefill"] for p in params), params
            return params
        self.producer.call(f"{HOOKS}:hand_off")
        return [
            {
                "do_remote_decode": False,
                "do_remote_prefill": True,
                "remote_engine_id": VLLM_PREFILL_ENGINE_ID,
                "remote_bootstrap_addr": f"http://127.0.0.1:{self.bootstrap_port}",
                "transfer_id": transfer_id,
            }
        ]


def engine_extra_env(patch_dir: str | None = None, **extra: str) -> dict[str, str]:
    """Extra environment of an engine: the hooks importable, the CPU patch only if asked, one
    OMP thread (`OMP_BIND`)."""
    paths = [patch_dir] if patch_dir else []
    paths += [str(BENCH_DIR), engine_env()["PYTHONPATH"]]
    env = {**MOONCAKE_ENV, "VLLM_CPU_OMP_THREADS_BIND": OMP_BIND}
    return {**env, "PYTHONPATH": os.pathsep.join(paths), **extra}


def vllm_config(role: str) -> dict[str, Any]:
    """A `KVTransferConfig` dict for vLLM 0.32's own `MooncakeConnector`."""
    config: dict[str, Any] = {
        "kv_connector": "MooncakeConnector",
        "kv_role": role,
        "kv_connector_extra_config": {"mooncake_protocol": "tcp"},
    }
    if role == "kv_producer":
        config["engine_id"] = VLLM_PREFILL_ENGINE_ID
    return config


def start_pairs(
    model: Path, kwargs: dict[str, Any], names: list[str], patch_dir: str, started: list[Any]
) -> list[Pair]:
    """Start the engine pairs the variants need (both `ours_*` variants share one pair);
    every engine is appended to `started` before it starts, for the caller to close."""
    from vllm_ascend.distributed.kv_transfer.kv_p2p.pull_worker import IDLE_STEP_WAIT_S

    def engine(config: dict[str, Any], env: dict[str, str]) -> EngineProcess:
        started.append(EngineProcess(model, kv_transfer_config=config, llm_kwargs=kwargs, env=env))
        return started[-1].start()

    pairs: list[Pair] = []
    ours: list[EngineProcess] = []
    for name in names:
        if name.startswith("ours"):
            if not ours:
                ours = [
                    engine(pd_config(role, free_port()), engine_extra_env())
                    for role in ("kv_producer", "kv_consumer")
                ]
            wait = 0.0 if name == "ours_no_idle_wait" else IDLE_STEP_WAIT_S
            pairs.append(Pair(name, ours[0], ours[1], idle_wait_s=wait))
            continue
        port = free_port()
        patched = engine_extra_env(
            patch_dir, VLLM_HOST_IP="127.0.0.1", VLLM_MOONCAKE_BOOTSTRAP_PORT=str(port)
        )
        producer, consumer = (
            engine(vllm_config(role), patched) for role in ("kv_producer", "kv_consumer")
        )
        pairs.append(Pair(name, producer, consumer, bootstrap_port=port))
    return pairs


def run_pair(
    pair: Pair, prompt: list[list[int]], max_tokens: int = 1
) -> tuple[float, float, list[int]]:
    """(prefill s, decode-to-last-token s, decode's tokens) of one request through `pair`."""
    if pair.idle_wait_s is not None:
        pair.consumer.call(f"{HOOKS}:set_idle_wait", seconds=pair.idle_wait_s)
    time.sleep(SETTLE_S)
    started = time.perf_counter()
    params = pair.prefill(prompt)
    prefill_s = time.perf_counter() - started
    pair.consumer.call(f"{HOOKS}:take_steps")
    time.sleep(SETTLE_S)
    started = time.perf_counter()
    traced = pair.consumer.call(
        f"{HOOKS}:traced_generate",
        prompt_token_ids=prompt,
        max_tokens=max_tokens,
        kv_transfer_params=params,
    )
    answered = time.perf_counter()
    pair.last_stages["decode"] = stages(traced, started, answered)
    return prefill_s, answered - started, list(traced["outputs"][0]["token_ids"])


def bench(repeats: int, prompt_tokens: int, names: list[str]) -> dict[str, Any]:
    """Raw samples and the check results of every variant (first repetition = warm-up)."""
    from tiny_model import build_tiny_llama

    engines: list[EngineProcess] = []
    with tempfile.TemporaryDirectory(prefix="vam-pd-ttft-") as tmp:
        model = build_tiny_llama(Path(tmp, "model"))
        patch_dir = Path(tmp, "patch")  # holds nothing else: it goes first on PYTHONPATH
        patch_dir.mkdir()
        (patch_dir / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
        kwargs = {**UNIPROC_LLM_KWARGS, "max_model_len": prompt_tokens + 64}
        try:
            engines.append(EngineProcess(model, llm_kwargs=kwargs, env=engine_extra_env()))
            single = engines[0].start()
            pairs = start_pairs(model, kwargs, names, str(patch_dir), engines)
            return measure(single, pairs, repeats, prompt_tokens)
        finally:
            for engine in reversed(engines):
                engine.close()


def _install(single: EngineProcess, pairs: list[Pair]) -> dict[str, bool]:
    """Install the step counters and traces; which engines run the CPU patch."""
    patched = {"single": single.call(f"{HOOKS}:device_index_patched")}
    single.call(f"{HOOKS}:install_trace", connector=False)
    for pair in pairs:
        pair.consumer.call(f"{HOOKS}:take_steps")  # installs the counter
        for engine in (pair.producer, pair.consumer):
            engine.call(f"{HOOKS}:install_trace")
        patched[pair.name] = all(
            e.call(f"{HOOKS}:device_index_patched") for e in (pair.producer, pair.consumer)
        )
    # The patch reaches vLLM's connector engines, and only them.
    assert patched == {k: k == "vllm_mooncake" for k in patched}, patched
    return patched


def _single(single: EngineProcess, prompt: list[list[int]], max_tokens: int) -> tuple[float, Any]:
    """(seconds, traced result) of one single-engine call after `SETTLE_S` of idle."""
    time.sleep(SETTLE_S)
    started = time.perf_counter()
    traced = single.call(
        f"{HOOKS}:traced_generate",
        prompt_token_ids=prompt,
        max_tokens=max_tokens,
        kv_transfer_params=[None],
    )
    answered = time.perf_counter()
    return answered - started, stages(traced, started, answered) | {"traced": traced}


def _pair_rep(pair: Pair, single: EngineProcess, prompt: list[list[int]], keep: bool) -> float:
    """One prefill -> decode through `pair`, its samples kept if `keep`; bytes read (ours)."""
    ours = pair.idle_wait_s is not None
    before = pair.consumer.call(f"{HOOKS}:connector_bytes_read") if ours else 0.0
    prefill_s, decode_s, got = run_pair(pair, prompt)
    read = pair.consumer.call(f"{HOOKS}:connector_bytes_read") - before if ours else 0.0
    steps = pair.consumer.call(f"{HOOKS}:take_steps")
    want = single.generate(prompt_token_ids=prompt, max_tokens=1)[0].token_ids
    if keep:
        values = (prefill_s, decode_s, steps, got == want)
        for key, value in zip(("prefill", "decode", "steps", "token_equal"), values, strict=True):
            pair.samples[key].append(value)
        pair.samples["prefill_stages"].append(pair.last_stages["prefill"])
        pair.samples["decode_stages"].append(pair.last_stages["decode"])
    return float(read)


def measure(
    single: EngineProcess, pairs: list[Pair], repeats: int, prompt_tokens: int
) -> dict[str, Any]:
    """Run the repetitions on started engines; `bench`'s result."""
    patched = _install(single, pairs)
    single_s: list[float] = []
    single_stages: list[dict[str, float]] = []
    floor: dict[str, list[float]] = {"decode_step_s": [], "memcpy_s": [], "kv_bytes": []}
    seed = 1000
    for rep in range(repeats + 1):
        seed += 1
        elapsed, traced = _single(single, token_prompts(1, prompt_tokens, seed=seed), 1)
        seed += 1  # the floor's decode step: a fresh prompt, 2 tokens
        _, two = _single(single, token_prompts(1, prompt_tokens, seed=seed), 2)
        kv_bytes = 0.0
        for pair in pairs[rep % len(pairs) :] + pairs[: rep % len(pairs)]:
            seed += 1
            prompt = token_prompts(1, prompt_tokens, seed=seed)
            kv_bytes = max(kv_bytes, _pair_rep(pair, single, prompt, keep=rep > 0))
        if rep:
            single_s.append(elapsed)
            traced.pop("traced")
            single_stages.append(traced)
            floor["decode_step_s"].append(decode_step_s(two["traced"]))
            floor["kv_bytes"].append(kv_bytes)
            floor["memcpy_s"].append(memcpy_s(int(kv_bytes)))
    check = {}
    for pair in pairs:  # a fresh prompt each: the ours_* variants share their engines
        seed += 1
        prompt = token_prompts(1, prompt_tokens, seed=seed)
        want = single.generate(prompt_token_ids=prompt, max_tokens=8)[0].token_ids
        check[pair.name] = run_pair(pair, prompt, max_tokens=8)[2] == want
    return {
        "prompt_tokens": prompt_tokens,
        "repeats": repeats,
        "benchmark_only_patch": {"name": PATCH_NAME, "engines_patched": patched},
        "single_s": single_s,
        "floor": floor,
        "stages": {"single": single_stages},
        "variants": {p.name: p.samples for p in pairs},
        "eight_token_check": check,
    }


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.1f} / {min(values) * 1e3:.1f}"


def table(result: dict[str, Any]) -> str:
    """The Markdown table of `bench`'s result: medians / minima in ms."""
    single = result["single_s"]
    rows = [
        "| path | prefill ms | decode to first token ms | TTFT ms | TTFT / single (medians) "
        "| decode steps (median) | decode token = single |",
        "|---|---|---|---|---|---|---|",
        f"| single engine | - | - | {_ms(single)} | 1.00 | - | - |",
    ]
    for name, s in result["variants"].items():
        ttft = [p + d for p, d in zip(s["prefill"], s["decode"], strict=True)]
        ratio = statistics.median(ttft) / statistics.median(single)
        equal = f"{sum(s['token_equal'])}/{len(s['token_equal'])}"
        equal += f", 8-token check {'ok' if result['eight_token_check'][name] else 'DIFFERS'}"
        rows.append(
            f"| {name} | {_ms(s['prefill'])} | {_ms(s['decode'])} | {_ms(ttft)} | {ratio:.2f} "
            f"| {statistics.median(s['steps']):g} | {equal} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = bench_cli.parser(__doc__)
    parser.add_argument("--repeats", type=int, default=5, help="measured repetitions")
    parser.add_argument("--prompt-tokens", type=int, default=1024, help="tokens per prompt")
    parser.add_argument(
        "--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS), help="P/D paths"
    )
    parser.add_argument("--json", type=Path, help="write the raw samples here")
    args = parser.parse_args(argv)
    os.environ.setdefault("MC_LOG_LEVEL", "ERROR")
    if "vllm_mooncake" in args.variants:
        print(f"BENCHMARK-ONLY PATCH: {PATCH_NAME} (see this script's docstring)")
    load_before = os.getloadavg()[0]
    result = bench(args.repeats, args.prompt_tokens, args.variants)
    result["load_average"] = [load_before, os.getloadavg()[0]]
    result.update(run_info("vllm", "torch", "mooncake"))
    print(
        f"{args.prompt_tokens}-token prompt, medians / minima of {args.repeats} "
        f"(load average {load_before:.1f} before, {result['load_average'][1]:.1f} after)"
    )
    print(table(result))
    print(floor_table(result))
    print(stage_table(result))
    patched = [k for k, v in result["benchmark_only_patch"]["engines_patched"].items() if v]
    print(f"benchmark-only patch active in the engines of: {', '.join(patched) or 'none'}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
