"""The soak's load: prompts sharing prefixes, their reference outputs, closed-loop clients.

Requests go out through vLLM's own benchmark client code,
`vllm.benchmarks.lib.endpoint_request_func.async_request_openai_completions` (what `vllm bench
serve --backend openai` sends: a streamed `/v1/completions`), here with token-id prompts,
`temperature=0` and `ignore_eos` in its `extra_body`. Its `aiohttp` session carries the request
bound (`REQUEST_BOUND_S`, total time): a request still open then is cut by the client and
counted as hung. The request function catches every error into its result, so one bad request
never stops a client.

Outputs are compared as the text the stream carried (the request function keeps text, not token
ids); the reference is the same request function against a plain engine, so both sides go
through the same detokenizer.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp
from vllm.benchmarks.lib.endpoint_request_func import (
    RequestFuncInput,
    RequestFuncOutput,
    async_request_openai_completions,
)

__all__ = ["Load", "Prompt", "Record", "make_prompts", "reference_outputs"]

# A request not ended after this long (the longest fault, a 45 s master hang, plus as much again
# for the queue it leaves behind) hangs.
REQUEST_BOUND_S = 90.0
PREFIX_TOKENS = (64, 128, 192, 256)
SUFFIX_TOKENS = (16, 160)
OUTPUT_TOKENS = (8, 16, 32)
VOCAB = (3, 512)  # the tiny model's ids, special ids 0..2 left out


@dataclass(frozen=True)
class Prompt:
    index: int
    token_ids: list[int]
    max_tokens: int


@dataclass
class Record:
    """One request: `start`/`end` in seconds since the run began."""

    target: str
    prompt: int
    start: float
    end: float
    ok: bool
    hung: bool
    wrong: bool
    ttft: float
    max_gap: float
    error: str


def make_prompts(seed: int, prefixes: int = 6, per_prefix: int = 6) -> list[Prompt]:
    """`prefixes` x `per_prefix` prompts: each a shared prefix of one of `PREFIX_TOKENS` lengths
    plus its own suffix (mixed lengths), and one of `OUTPUT_TOKENS` as its output length."""
    rng = random.Random(seed)
    prompts = []
    for p in range(prefixes):
        prefix = [rng.randrange(*VOCAB) for _ in range(PREFIX_TOKENS[p % len(PREFIX_TOKENS)])]
        for _ in range(per_prefix):
            suffix = [rng.randrange(*VOCAB) for _ in range(rng.randint(*SUFFIX_TOKENS))]
            prompts.append(Prompt(len(prompts), prefix + suffix, rng.choice(OUTPUT_TOKENS)))
    return prompts


def _request(url: str, model: str, prompt: Prompt) -> RequestFuncInput:
    return RequestFuncInput(
        prompt=prompt.token_ids,
        api_url=f"{url}/v1/completions",
        prompt_len=len(prompt.token_ids),
        output_len=prompt.max_tokens,
        model=model,
        ignore_eos=True,
        extra_body={"temperature": 0.0},
    )


def _session() -> aiohttp.ClientSession:
    timeout = aiohttp.ClientTimeout(total=REQUEST_BOUND_S)
    return aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0))


async def _reference(url: str, model: str, prompts: list[Prompt]) -> list[str]:
    out = []
    async with _session() as session:
        for prompt in prompts:
            result = await async_request_openai_completions(_request(url, model, prompt), session)
            if not result.success:
                raise RuntimeError(f"reference request {prompt.index} failed: {result.error}")
            out.append(result.generated_text)
    return out


def reference_outputs(url: str, model: str, prompts: list[Prompt]) -> list[str]:
    """Each prompt's output from the plain engine at `url`, one request at a time.

    Raises:
        RuntimeError: a reference request failed.
    """
    return asyncio.run(_reference(url, model, prompts))


def _classify(target: str, prompt: Prompt, out: RequestFuncOutput, ref: str, t0: float) -> Record:
    hung = "TimeoutError" in out.error
    ok = out.success and out.generated_text == ref
    return Record(
        target=target,
        prompt=prompt.index,
        start=out.start_time - t0,
        end=time.perf_counter() - t0,
        ok=ok,
        hung=hung,
        wrong=out.success and not ok,
        ttft=out.ttft,
        max_gap=max(out.itl, default=0.0),
        error="" if out.success else (out.error.strip().splitlines() or ["?"])[-1][:200],
    )


class Load:
    """Closed-loop clients, `per_target` per target URL, in a thread of their own.

    Args:
        targets: name -> base URL.
        model: the served model name.
        prompts, references: the prompts and their reference texts (same order).
        per_target: requests in flight per target.
        seed: the prompt-choice seed.
        t0: `time.perf_counter()` at the run's start (records are relative to it).
    """

    def __init__(
        self,
        targets: dict[str, str],
        model: str,
        prompts: list[Prompt],
        references: list[str],
        *,
        per_target: int,
        seed: int,
        t0: float,
    ) -> None:
        self.targets, self.model = targets, model
        self.prompts, self.references = prompts, references
        self.per_target, self.seed, self.t0 = per_target, seed, t0
        self.records: list[Record] = []
        self.in_flight: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = REQUEST_BOUND_S + 30) -> None:
        """Stop sending; wait for what is in flight (each request ends within its bound)."""
        self._stop.set()
        self._thread.join(timeout_s)

    async def _main(self) -> None:
        async with _session() as session:
            workers = [
                self._worker(session, name, url, random.Random(f"{self.seed}-{name}-{i}"))
                for name, url in self.targets.items()
                for i in range(self.per_target)
            ]
            await asyncio.gather(*workers)

    async def _worker(
        self, session: aiohttp.ClientSession, name: str, url: str, rng: random.Random
    ) -> None:
        while not self._stop.is_set():
            prompt = rng.choice(self.prompts)
            key = id(asyncio.current_task())
            self.in_flight[key] = (name, time.perf_counter() - self.t0)
            out = await async_request_openai_completions(_request(url, self.model, prompt), session)
            self.in_flight.pop(key, None)
            ref = self.references[prompt.index]
            self.records.append(_classify(name, prompt, out, ref, self.t0))
            if not out.success:
                await asyncio.sleep(0.5)  # a refused connection answers at once: do not spin

    def oldest_in_flight(self, now: float) -> float:
        """Age of the oldest request still open, seconds (0 when none)."""
        starts = [start for _, start in list(self.in_flight.values())]
        return max((now - s for s in starts), default=0.0)


def records_json(records: list[Record]) -> list[dict[str, Any]]:
    return [asdict(r) for r in records]
