"""One declarative spec for every connector's configuration, and the one parser that reads it.

A configuration is a frozen dataclass whose fields are the spec. A field made with `setting()`
is a key of the mapping: its metadata (a `ConfigKey`) holds the key's converter, its
documentation and how its default is found. A field without it is a value the caller supplies
(the engine id, the TP size, ...). `parse` reads a mapping against that spec once, at
construction: an unknown key is an error listing the valid ones (a typo must not fall back to a
default silently), every written value goes through its key's converter, every error names the
key and where the mapping came from, and the dataclass's `validate()` (the rules that span
fields) runs last. `config_table` renders the same spec as the Markdown table of the README.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import Any, Protocol, TypeVar

__all__ = [
    "ConfigKey",
    "Convert",
    "ConfigSource",
    "ExtraConfigSource",
    "SettingsSource",
    "boolean",
    "config_table",
    "extra_config_label",
    "one_of",
    "parse",
    "plain",
    "positive",
    "setting",
    "text",
]

T = TypeVar("T")

# `(label, raw value, values resolved so far) -> field value`. `label` is the key as errors name
# it; a converter raises `ValueError` with a message that starts with it. The values resolved so
# far are the caller's context and the fields declared before this one.
Convert = Callable[[str, Any, Mapping[str, Any]], Any]
# `values resolved so far -> raw value` of an absent key, converted as if it had been written.
Derive = Callable[[Mapping[str, Any]], Any]

_METADATA_KEY = "vllm_ascend.config_key"


def _as_is(label: str, value: Any, values: Mapping[str, Any]) -> Any:
    return value


@dataclass(frozen=True)
class ConfigKey:
    """One key of a configuration mapping: the metadata of the dataclass field it sets.

    Attributes:
        doc: what the key means, Markdown (the table's last column).
        convert: converts and checks a written value (see `Convert`).
        default_doc: the default as the table shows it, Markdown; "" = the field's default.
        name: the key in the mapping; "" = the field's name.
        derive: the raw value of an absent key, computed from the values resolved so far.
        required: the form of a value, quoted when the key is absent (`"'host:port'"`); "" =
            the key is optional.
        none_is_absent: a written `null` counts as absent (its default applies).
        also: other keys that set the same field (another unit); at most one may be written.
    """

    doc: str
    convert: Convert = _as_is
    default_doc: str = ""
    name: str = ""
    derive: Derive | None = None
    required: str = ""
    none_is_absent: bool = False
    also: tuple[ConfigKey, ...] = ()


def setting(doc: str, convert: Convert = _as_is, *, default: Any = MISSING, **spec: Any) -> Any:
    """A dataclass field that is a configuration key (`default`: the field's default; the other
    keywords: `ConfigKey`'s)."""
    return field(default=default, metadata={_METADATA_KEY: ConfigKey(doc, convert, **spec)})


def extra_config_label(key: str) -> str:
    """How errors name a key of `kv_connector_extra_config`: `kv_connector_extra_config['key']`."""
    return f"kv_connector_extra_config[{key!r}]"


class ConfigSource(Protocol):
    """Where a mapping came from, as its errors name it and its keys."""

    def label(self, key: str) -> str: ...

    def unknown(self, unknown: list[str], valid: list[str]) -> str: ...


@dataclass(frozen=True)
class ExtraConfigSource:
    """A connector's own `kv_connector_extra_config`; `connector` names it in errors."""

    connector: str

    def __str__(self) -> str:
        return f"{self.connector} kv_connector_extra_config"

    def label(self, key: str) -> str:
        return extra_config_label(key)

    def unknown(self, unknown: list[str], valid: list[str]) -> str:
        return f"unknown {self} key(s) {unknown}; valid keys: {valid}"


@dataclass(frozen=True)
class SettingsSource:
    """A store's settings, named by where they came from (`"$MOONCAKE_CONFIG_PATH=/m.json"`)."""

    origin: str

    def __str__(self) -> str:
        return self.origin

    def label(self, key: str) -> str:
        return f"{self.origin}: {key}"

    def unknown(self, unknown: list[str], valid: list[str]) -> str:
        return f"{self.origin}: unknown key(s) {unknown}; valid keys: {valid}"


def _keys(cls: type) -> list[tuple[Field[Any], tuple[ConfigKey, ...]]]:
    # Each key field with its keys, the main one first and named.
    out = []
    for f in fields(cls):
        spec = f.metadata.get(_METADATA_KEY)
        if spec is not None:
            main = spec if spec.name else replace(spec, name=f.name)
            out.append((f, (main, *spec.also)))
    return out


def parse(cls: type[T], mapping: Any, source: ConfigSource, /, **context: Any) -> T:
    """Read `mapping` against the spec of the dataclass `cls` (see the module docstring).

    Args:
        cls: the configuration dataclass; its class attribute `IGNORED_KEYS`, when present,
            names keys accepted and not read (configs written for older releases).
        mapping: the raw settings (a JSON object).
        source: where they came from, for error messages.
        context: values of the fields that are not keys, and defaults the caller computed for
            keys (used as they are when the key is absent).

    Returns:
        The configuration, after its `validate()` (when it has one) passed.

    Raises:
        ValueError: not a mapping, an unknown key (the valid ones are listed in field order),
            a missing required key, two keys of one field, or a value its converter refuses.
    """
    if not isinstance(mapping, Mapping):
        raise ValueError(f"{source}: expected a JSON object, got {type(mapping).__name__}")
    keyed = _keys(cls)
    valid = [key.name for _, keys in keyed for key in keys]
    unknown = sorted(set(mapping) - set(valid) - set(getattr(cls, "IGNORED_KEYS", ())))
    if unknown:
        raise ValueError(source.unknown(unknown, valid))
    values = dict(context)
    for f, keys in keyed:
        _resolve(f, keys, mapping, source, values)
    config = cls(**values)
    validate = getattr(config, "validate", None)
    if validate is not None:
        validate()
    return config


def _resolve(
    f: Field[Any],
    keys: tuple[ConfigKey, ...],
    mapping: Mapping[str, Any],
    source: ConfigSource,
    values: dict[str, Any],
) -> None:
    written = [k for k in keys if k.name in mapping]
    written = [k for k in written if not (k.none_is_absent and mapping[k.name] is None)]
    if len(written) > 1:
        raise ValueError(f"set either {' or '.join(k.name for k in written)}, not both")
    main = keys[0]
    if written:
        key = written[0]
        values[f.name] = key.convert(source.label(key.name), mapping[key.name], values)
    elif f.name in values:
        return
    elif main.derive is not None:
        values[f.name] = main.convert(source.label(main.name), main.derive(values), values)
    elif f.default is not MISSING:
        values[f.name] = f.default
    elif main.required:
        raise ValueError(f"{source}: {main.name!r} is required ({main.required})")


def config_table(cls: type) -> str:
    """The Markdown table of the keys of the configuration dataclass `cls`.

    Returns:
        `| key | default | meaning |` rows, one per key in field order, then the keys accepted
        and ignored; newline-terminated.

    Raises:
        TypeError: a key whose field has no default and whose spec shows none.
    """
    rows = ["| key | default | meaning |", "|---|---|---|"]
    for f, keys in _keys(cls):
        rows += [f"| `{key.name}` | {_default_text(f, key)} | {key.doc} |" for key in keys]
    for name in getattr(cls, "IGNORED_KEYS", ()):
        rows.append(f"| `{name}` | - | accepted and ignored (configs of older releases) |")
    return "\n".join(rows) + "\n"


def _default_text(f: Field[Any], key: ConfigKey) -> str:
    if key.default_doc:
        return key.default_doc
    if key.required:
        return "required"
    if f.default is MISSING or f.default is None:
        raise TypeError(f"{f.name}: give the default as the table shows it (`default_doc=`)")
    return f"`{json.dumps(f.default)}`"


# ---- converters ------------------------------------------------------------------------------


def plain(check: Callable[[str, Any], Any]) -> Convert:
    """A converter from a `(label, value) -> value` function that needs no other value."""
    return lambda label, value, values: check(label, value)


def positive(*, integer: bool = False, maximum: int | None = None, digits: bool = False) -> Convert:
    """A converter to a positive finite number: an `int` when `integer`, else a `float`.

    `bool` is refused (`true` in a JSON config is a mistake, not 1); `digits` also takes a
    string of digits (`"2"`); `maximum` bounds the value.
    """

    def convert(label: str, value: Any, values: Mapping[str, Any]) -> Any:
        if digits and isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        ok_types = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, ok_types):
            kind = "an integer" if integer else "a number"
            raise ValueError(f"{label} must be {kind}, got {value!r}")
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"{label} must be positive, got {value!r}")
        if maximum is not None and value > maximum:
            raise ValueError(f"{label} must be at most {maximum}, got {value!r}")
        return int(value) if integer else float(value)

    return convert


def text(*, strip: bool = False, nonempty: bool = False) -> Convert:
    """A converter that accepts a string (`nonempty`: with something besides spaces)."""

    def convert(label: str, value: Any, values: Mapping[str, Any]) -> str:
        if not isinstance(value, str) or (nonempty and not value.strip()):
            kind = "a non-empty string" if nonempty else "a string"
            raise ValueError(f"{label} must be {kind}, got {value!r}")
        return value.strip() if strip else value

    return convert


def boolean(label: str, value: Any, values: Mapping[str, Any]) -> bool:
    """Converter that accepts `true` or `false` only."""
    if not isinstance(value, bool):
        raise ValueError(f"{label} must be true or false")
    return value


def one_of(choices: Sequence[str], *, fold_case: bool = False) -> Convert:
    """A converter that accepts one of `choices` (`fold_case`: any case, as text, lowered)."""

    def convert(label: str, value: Any, values: Mapping[str, Any]) -> Any:
        chosen = str(value).lower() if fold_case else value
        if chosen not in choices:
            raise ValueError(f"{label} must be one of {choices}, got {value!r}")
        return chosen

    return convert
