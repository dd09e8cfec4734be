"""The greedy comparison of `greedy.py` on made-up outputs (no engine started): equal outputs and
a flipped near tie match; a token with no tie behind it, or logprobs that drift, do not."""

from __future__ import annotations

import pytest
from greedy import NEAR, assert_same_greedy, mismatch


def out(tokens: list[int], logprobs: list[dict[int, float]] | None) -> dict[str, object]:
    lps = None if logprobs is None else [{str(t): v for t, v in p.items()} for p in logprobs]
    return {"token_ids": tokens, "logprobs": lps}


BASE = out([7, 8, 9], [{7: -1.0, 3: -2.0}, {8: -1.5, 4: -1.505}, {9: -1.2, 5: -3.0}])


def test_equal_outputs_and_a_flipped_near_tie_match() -> None:
    assert mismatch(BASE, BASE) is None
    # Token 1 was a near tie (8 at -1.5, 4 at -1.505): the other engine took 4, then went on
    # from another context.
    flipped = out([7, 4, 1], [{7: -1.0, 3: -2.0}, {4: -1.499, 8: -1.5}, {1: -0.1}])
    assert mismatch(flipped, BASE) is None
    assert_same_greedy([flipped, BASE], [BASE, BASE])


@pytest.mark.parametrize(
    ("other", "why"),
    [
        # Token 1 differs with no tie behind it: 4 sat 0.5 nats below 8, now 0.5 above.
        (
            out([7, 4, 9], [{7: -1.0, 3: -2.0}, {4: -1.0, 8: -1.5}, {9: -1.2}]),
            "token 1: logprobs differ",
        ),
        # The other side's token is not among this side's logprobs at all.
        (
            out([7, 6, 9], [{7: -1.0, 3: -2.0}, {6: -1.4}, {9: -1.2}]),
            "token 1: 6 != 8, no near tie",
        ),
        # Same tokens, but the distribution moved: wrong KV shows here before it flips a token.
        (
            out([7, 8, 9], [{7: -1.0, 3: -2.0}, {8: -1.5 + 4 * NEAR, 4: -1.505}, {9: -1.2}]),
            "logprobs differ",
        ),
        (out([7, 8], [{7: -1.0}, {8: -1.5}]), "2 tokens, 3 expected"),
        (out([7, 8, 1], None), "no logprobs to judge by"),
    ],
)
def test_a_real_difference_does_not_match(other: dict[str, object], why: str) -> None:
    reason = mismatch(other, BASE)
    assert reason is not None and why in reason
    with pytest.raises(AssertionError, match=why):
        assert_same_greedy([other], [BASE])
