"""Validation of `KVTransferConfig.kv_connector_extra_config`, shared by the connectors' configs.

Every connector validates its extra config once, at construction, with errors that name the key
and the value: an unknown key is an error listing the valid ones (a typo must not fall back to a
default silently), and a number must be of the right type and positive.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["check_known_keys", "positive_number"]


def check_known_keys(
    extra: Mapping[str, Any], valid: Iterable[str], *, connector: str, ignored: Iterable[str] = ()
) -> None:
    """Refuse keys of `extra` that are neither in `valid` nor in `ignored`.

    Args:
        extra: the `kv_connector_extra_config` mapping.
        valid: the keys the connector reads (listed in the error, in this order).
        connector: the connector's name in the error (`"CPU offload"`, ...).
        ignored: keys accepted and not read (kept for configs of older releases).

    Raises:
        ValueError: `"unknown <connector> kv_connector_extra_config key(s) [...]; valid keys:
            [...]"`, the unknown keys sorted.
    """
    valid = list(valid)
    unknown = sorted(set(extra) - set(valid) - set(ignored))
    if unknown:
        raise ValueError(
            f"unknown {connector} kv_connector_extra_config key(s) {unknown}; valid keys: {valid}"
        )


def positive_number(key: str, value: Any, *, integer: bool) -> float:
    """`value` as a positive finite number.

    Args:
        key: the key's name in the error (`kv_connector_extra_config[<key>]`).
        value: the raw value; `bool` is refused (`true` in a JSON config is a mistake, not 1).
        integer: accept only `int`, else `int` or `float`.

    Returns:
        The value as a float (callers wanting an int convert it back).

    Raises:
        ValueError: the wrong type, or not finite and > 0.
    """
    ok_types = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, ok_types):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"kv_connector_extra_config[{key!r}] must be {kind}, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"kv_connector_extra_config[{key!r}] must be positive, got {value!r}")
    return float(value)
