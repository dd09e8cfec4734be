"""Comparing the greedy outputs of two engines, as vLLM's own tests do (`check_logprobs_close`),
but stricter.

Two engines agree bit for bit only while they compute the same floats. Most of the time they do
here: a P/D decode engine's logprobs equal a single engine's exactly. But a batch of another
shape can move a bfloat16 logit by one unit in the last place (logprobs differ by ~1e-5 where
that happens), and under load the batches differ: a decode engine admits each request when its
KV cache lands. The tiny random model's top two logits are often that close (a twentieth of the
positions within 0.004 nats, some exactly tied), so such a shift can flip a near tie a few tokens
in, after which the two outputs follow different contexts.

So two outputs match when, up to and including the first token where they differ:
- every logprob both sides report (the top `LOGPROBS` at each position) agrees within `NEAR`
  nats, and
- at that token, each side's choice is within `NEAR` of the other's in its own logprobs (a near
  tie).
Past that token nothing is compared. KV cache blocks that are wrong move the logprobs by far
more than `NEAR`, also where the tokens stay the same, so this is a stronger check than equal
tokens, not a weaker one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["LOGPROBS", "NEAR", "assert_same_greedy", "logprobs_json", "mismatch"]

# Top logprobs asked of every greedy request (vLLM also returns the chosen token's).
LOGPROBS = 5
# Nats. Five bfloat16 units in the last place of this model's logits (|logit| < 1).
NEAR = 0.02

Logprobs = list[dict[str, float]]


def logprobs_json(output: Any) -> Logprobs | None:
    """A `vllm.CompletionOutput`'s logprobs as JSON: per token, {token id: logprob}."""
    if output.logprobs is None:
        return None
    return [{str(t): float(lp.logprob) for t, lp in pos.items()} for pos in output.logprobs]


def _fields(out: Any) -> tuple[list[int], Logprobs | None]:
    if isinstance(out, dict):
        return list(out["token_ids"]), out.get("logprobs")
    return list(out.token_ids), getattr(out, "logprobs", None)


def mismatch(actual: Any, expected: Any) -> str | None:
    """Why `actual` does not match `expected` (see the module docstring), or None.

    Both are `harness.Generation`s or probe dicts with `token_ids` and `logprobs`. Without
    logprobs on either side, the tokens must be equal.
    """
    a_ids, a_lps = _fields(actual)
    e_ids, e_lps = _fields(expected)
    if len(a_ids) != len(e_ids):
        return f"{len(a_ids)} tokens, {len(e_ids)} expected"
    if a_lps is None or e_lps is None:
        return None if a_ids == e_ids else "tokens differ and there are no logprobs to judge by"
    for i, (a, e) in enumerate(zip(a_ids, e_ids, strict=True)):
        drift = _drift(a_lps[i], e_lps[i])
        if drift > NEAR:
            return f"token {i}: logprobs differ by {drift:.4f} nats"
        if a == e:
            continue
        gaps = _gap(a_lps[i], a, e), _gap(e_lps[i], e, a)
        if max(gaps) > NEAR:
            return f"token {i}: {a} != {e}, no near tie (gaps {gaps[0]:.4f}, {gaps[1]:.4f} nats)"
        return None  # a near tie flipped: past it the contexts differ
    return None


def _drift(a: dict[str, float], e: dict[str, float]) -> float:
    return max((abs(a[t] - e[t]) for t in a.keys() & e.keys()), default=0.0)


def _gap(logprobs: dict[str, float], chosen: int, other: int) -> float:
    if str(other) not in logprobs:
        return float("inf")
    return logprobs[str(chosen)] - logprobs[str(other)]


def assert_same_greedy(actual: Sequence[Any], expected: Sequence[Any]) -> None:
    """Assert each output matches its expected one (see the module docstring)."""
    assert len(actual) == len(expected), f"{len(actual)} outputs, {len(expected)} expected"
    for n, (a, e) in enumerate(zip(actual, expected, strict=True)):
        why = mismatch(a, e)
        assert why is None, f"output {n}: {why}\n{_fields(a)[0]}\n{_fields(e)[0]}"
