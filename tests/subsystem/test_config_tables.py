"""README.md's configuration tables are rendered from the config dataclasses' fields, and the one
parser behind every connector's config (`utils/extra_config.py`) reads its spec as documented."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from vllm_ascend.distributed.kv_transfer.utils.extra_config import (
    ConfigKey,
    ExtraConfigSource,
    SettingsSource,
    config_table,
    parse,
    positive,
    setting,
    text,
)

README = Path(__file__).resolve().parents[2] / "README.md"
KV = "vllm_ascend.distributed.kv_transfer"
# Every connector configuration that reads a mapping with `parse`, and what importing it needs.
CONFIGS = [
    (f"{KV}.kv_pool.cpu_offload.config", "CPUOffloadConfig", None),
    (f"{KV}.kv_p2p.config", "MooncakeP2PConfig", None),
    (f"{KV}.kv_pool.ascend_store.config_data", "AscendStoreConfig", "vllm"),
    (f"{KV}.kv_pool.ascend_store.backend.mooncake_backend", "MooncakeStoreConfig", None),
    (f"{KV}.kv_pool.ascend_store.backend.memcache_backend", "MemcacheStoreConfig", None),
]


def readme_table(name: str) -> str:
    """The table under README.md's `####` heading that ends with "(`<name>`)"."""
    lines = README.read_text(encoding="utf-8").splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("#### ")]
    heads = [i for i in heads if lines[i].endswith(f"(`{name}`)")]
    assert len(heads) == 1, f"README.md needs one '#### ... (`{name}`)' heading"
    rest = lines[heads[0] + 1 :]
    while rest and not rest[0].strip():
        rest.pop(0)
    table = []
    for line in rest:
        if not line.startswith("|"):
            break
        table.append(line)
    return "\n".join(table) + "\n"


@pytest.mark.parametrize(("module", "name", "needs"), CONFIGS, ids=[c[1] for c in CONFIGS])
def test_readme_table_is_rendered_from_the_fields(
    module: str, name: str, needs: str | None
) -> None:
    if needs:
        pytest.importorskip(needs)
    cls = getattr(importlib.import_module(module), name)
    rendered = config_table(cls)
    assert readme_table(name) == rendered, (
        f"README.md's table for {name} differs from config_table({name}); paste:\n{rendered}"
    )
    # Every key the parser accepts has a row (and nothing else does).
    keys = [row.split("`")[1] for row in rendered.splitlines()[2:]]
    with pytest.raises(ValueError, match="valid keys") as info:
        parse_with(cls, {"no_such_key": 1})
    assert str(info.value).endswith(f"valid keys: {keys[: len(keys) - ignored(cls)]}")


def ignored(cls: type) -> int:
    return len(getattr(cls, "IGNORED_KEYS", ()))


def parse_with(cls: Any, extra: dict[str, Any]) -> Any:
    if hasattr(cls, "from_mapping"):
        return cls.from_mapping(extra)
    if cls.__name__ == "MooncakeP2PConfig":
        return cls.from_extra_config(
            extra,
            engine_id="e",
            kv_role="kv_both",
            kv_port=1,
            tp_size=1,
            dp_rank=0,
            total_kv_heads=1,
            block_size=16,
            default_transfer_timeout_s=1.0,
        )
    if cls.__name__ == "CPUOffloadConfig":
        return cls.from_extra_config(extra, engine_id="e")
    return cls.from_extra_config(extra)


# ---- the parser's rules, on a toy spec ------------------------------------------------------


def _double(label: str, value: Any, values: Mapping[str, Any]) -> int:
    return 2 * positive(integer=True)(label, value, values)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Toy:
    IGNORED_KEYS: ClassVar[tuple[str, ...]] = ("old_key",)

    engine: str
    host: str = setting("where", text(strip=True, nonempty=True), required="'h'")
    alias: str = setting(
        "defaults to host", text(), derive=lambda v: v["host"] + "!", default_doc="host + `!`"
    )
    count: int = setting(
        "a count",
        positive(integer=True),
        default=3,
        none_is_absent=True,
        also=(ConfigKey("twice the count", _double, name="half_count", default_doc="-"),),
    )
    timeout_s: float = setting("from the caller", positive(), default_doc="the caller's")

    def validate(self) -> None:
        if self.host == self.engine:
            raise ValueError("host and engine must differ")


def toy(mapping: Any, **context: Any) -> Toy:
    return parse(Toy, mapping, SettingsSource("toy.json"), **{"engine": "e", **context})


def test_parse_converts_derives_and_takes_the_callers_defaults() -> None:
    cfg = toy({"host": " h ", "count": None, "old_key": 1}, timeout_s=7.0)
    assert (cfg.host, cfg.alias, cfg.count, cfg.timeout_s) == ("h", "h!", 3, 7.0)
    cfg = toy({"host": "h", "alias": "a", "half_count": 2, "timeout_s": 1}, timeout_s=7.0)
    assert (cfg.alias, cfg.count, cfg.timeout_s) == ("a", 4, 1.0)


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ([], "toy.json: expected a JSON object, got list"),
        ({"hots": "h"}, "toy.json: unknown key(s) ['hots']; valid keys: ['host', 'alias', "),
        ({}, "toy.json: 'host' is required ('h')"),
        ({"host": " "}, "toy.json: host must be a non-empty string, got ' '"),
        ({"host": "h", "count": 1, "half_count": 1}, "set either count or half_count, not both"),
        ({"host": "h", "half_count": 0}, "toy.json: half_count must be positive, got 0"),
        ({"host": "e"}, "host and engine must differ"),
    ],
)
def test_parse_errors_name_the_key_and_the_source(mapping: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        toy(mapping, timeout_s=1.0)
    assert message in str(info.value)


def test_extra_config_errors_name_the_connector() -> None:
    with pytest.raises(ValueError) as info:
        parse(Toy, {"x": 1}, ExtraConfigSource("Toy"), engine="e")
    assert str(info.value).startswith("unknown Toy kv_connector_extra_config key(s) ['x']")
    with pytest.raises(ValueError) as info:
        parse(Toy, {"host": 5}, ExtraConfigSource("Toy"), engine="e")
    assert str(info.value) == "kv_connector_extra_config['host'] must be a non-empty string, got 5"


def test_table_rows_follow_the_fields() -> None:
    assert config_table(Toy).splitlines() == [
        "| key | default | meaning |",
        "|---|---|---|",
        "| `host` | required | where |",
        "| `alias` | host + `!` | defaults to host |",
        "| `count` | `3` | a count |",
        "| `half_count` | - | twice the count |",
        "| `timeout_s` | the caller's | from the caller |",
        "| `old_key` | - | accepted and ignored (configs of older releases) |",
    ]


def test_a_key_without_a_default_to_show_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoDefault:
        value: int = setting("derived, but the table cannot say from what", derive=lambda v: 1)

    with pytest.raises(TypeError, match="value: give the default"):
        config_table(NoDefault)
